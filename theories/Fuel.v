(** * Fuel that suffices: an explicit bound for descending recursion

    [run_complete] says that *some* fuel makes the machine answer whenever
    the step relation reaches an answer; it says neither how much nor for
    which patterns. A recursive pattern can loop ([P(x) = P(x) ‖ Relu(x)]
    at a [Relu] never answers), so no bound holds for every pattern. This
    file gives one for the class the paper's recursive patterns belong to:
    every cycle of calls passes under an operator application, so each
    unfolding of a recursive call matches a strictly smaller subgraph
    ([PwChain], [UnaryChain], [MatMulEpilog] of Figures 3 and 14).

    - [depth_le G n t]: every downward path from [t] has at most [n] edges.
    - [ug L p] ("unguarded calls"): the calls of [p] that are not under an
      operator application (they match at the same node) unfold at most [L]
      deep; a match-constraint's right side counts as unguarded (it matches
      at a node [p] bound, which is no deeper than [t], see [post]).
      [args_ok p]: every argument of an operator application in [p] is
      itself [ug LMAX]. [descending D]: every definition's body is
      [ug LMAX] and [args_ok], with [LMAX = length D]: the unguarded calls
      form no cycle (a cycle would unfold [length D + 1] deep).
    - [cost n L p = (c, m)]: an upper bound [c] on the machine's steps spent
      inside [p] at a node of depth at most [n], over all of its
      alternatives, and an upper bound [m] on how many times [p] succeeds
      (hands a substitution to its continuation). A continuation that
      takes at most [B] steps before succeeding or giving up gives
      [c + m * B] for [p] followed by it.
    - [fuel_bound D n p = c + m]: the fuel for a root ([B = 1]: the last
      step is ST-SUCCESS).

    Theorems:
    - [match_pattern_fuel]: for a well-formed descending pattern at a node
      of depth at most [n], [match_pattern] with at least [fuel_bound D n p]
      steps never answers [OOutOfFuel] (it answers [OSuccess] or
      [OFailure], which the soundness theorems give a meaning).
    - [match_root_fuel]: the same for the library's entry point
      [match_root] (behind [pypm_match] and every [pypm_match_all] entry).

    The bound is exponential in general (each alternate may succeed and
    re-run the rest of the pattern), polynomial for the paper's chains.
    The Python frontend computes it per pattern (a transcription of [cost],
    tested against the machine's step counts) and tells the user the depth
    up to which the default fuel suffices ([pm.termination]).

    The proof ([cost_sound]) is a Hoare-style statement over the machine
    with continuations: from [match(p, t) :: k] the machine succeeds or
    gives up to the stack it started with within [c + m * B] steps, given
    that [k] does so within [B] steps from every state [p] can hand it
    ([kont]: a larger substitution, in which the variables [p] binds are
    bound to nodes of depth at most [n]). *)

From Coq Require Import List Arith Lia Bool.
From PyPM Require Import Syntax Subst Declarative Env Algorithmic Interpreter Soundness
  RootIndex Entry.
Import ListNotations.

(** ** Depth of a node *)

(** Every downward path from [t] has at most [n] edges. *)
Fixpoint depth_le (G : graph) (n : nat) (t : node) : Prop :=
  match n with
  | O => children G t = []
  | S n' => forall c, In c (children G t) -> depth_le G n' c
  end.

Lemma depth_le_S : forall G n t, depth_le G n t -> depth_le G (S n) t.
Proof.
  intros G. induction n as [|n IH]; intros t H; simpl in *.
  - rewrite H. intros c [].
  - intros c Hc. apply IH. apply H. exact Hc.
Qed.

Section Class.
  Variable D : list pdef.

  Definition LMAX : nat := length D.

  (** The calls of [p] outside operator applications unfold at most [L]
      deep (a call of an unknown definition fails at once). *)
  Fixpoint ug (L : nat) : pattern -> bool :=
    fix go (p : pattern) : bool :=
      match p with
      | PVar _ | PApp _ _ | PFunVar _ _ => true
      | PAlt p1 p2 | PConstr p1 p2 _ => go p1 && go p2
      | PGuard q _ | PExists _ q | PExistsF _ q => go q
      | PCall P _ _ =>
          match L with
          | O => false
          | S L' => match nth_error D P with Some d => ug L' (body d) | None => true end
          end
      end.

  (** Unfolding equations of [ug] (its outer recursion is on [L]). *)
  Lemma ug_alt : forall L p1 p2, ug L (PAlt p1 p2) = ug L p1 && ug L p2.
  Proof. destruct L; reflexivity. Qed.
  Lemma ug_constr : forall L p p' x, ug L (PConstr p p' x) = ug L p && ug L p'.
  Proof. destruct L; reflexivity. Qed.
  Lemma ug_guard : forall L p g, ug L (PGuard p g) = ug L p.
  Proof. destruct L; reflexivity. Qed.
  Lemma ug_exists : forall L x p, ug L (PExists x p) = ug L p.
  Proof. destruct L; reflexivity. Qed.
  Lemma ug_existsf : forall L F p, ug L (PExistsF F p) = ug L p.
  Proof. destruct L; reflexivity. Qed.

  (** Every argument of an operator application in [p] is [ug LMAX]. *)
  Fixpoint args_ok (p : pattern) : bool :=
    match p with
    | PVar _ | PCall _ _ _ => true
    | PApp _ ps | PFunVar _ ps => forallb (fun q => ug LMAX q && args_ok q) ps
    | PAlt p1 p2 | PConstr p1 p2 _ => args_ok p1 && args_ok p2
    | PGuard q _ | PExists _ q | PExistsF _ q => args_ok q
    end.

  (** The class: every cycle of calls passes under an operator application. *)
  Definition descending : bool :=
    forallb (fun d => ug LMAX (body d) && args_ok (body d)) D.

  (** ** The bound *)

  (** A sequence of patterns matched one after the other (the children of
      an operator application): steps [c1 + m1 * c2], successes [m1 * m2]. *)
  Fixpoint seq_cost (f : pattern -> nat * nat) (ps : list pattern) : nat * nat :=
    match ps with
    | [] => (0, 1)
    | p :: ps' =>
        let r1 := f p in
        let r2 := seq_cost f ps' in
        (fst r1 + snd r1 * fst r2, snd r1 * snd r2)
    end.

  (** [(steps, successes)] of [p] at a node of depth at most [n], with
      unguarded calls unfolded at most [L] deep. *)
  Fixpoint cost (n : nat) : nat -> pattern -> nat * nat :=
    fix costL (L : nat) : pattern -> nat * nat :=
      fix go (p : pattern) : nat * nat :=
        match p with
        | PVar _ => (1, 1)
        | PApp _ ps | PFunVar _ ps =>
            match n with
            | O => (1, match ps with [] => 1 | _ :: _ => 0 end)
            | S n' => let r := seq_cost (cost n' LMAX) ps in (1 + fst r, snd r)
            end
        | PAlt p1 p2 =>
            let r1 := go p1 in
            let r2 := go p2 in
            (1 + fst r1 + fst r2, snd r1 + snd r2)
        | PGuard q _ | PExists _ q | PExistsF _ q =>
            let r := go q in (1 + fst r + snd r, snd r)
        | PConstr q q' _ =>
            let r := go q in
            let r' := go q' in
            (1 + fst r + snd r * (1 + fst r'), snd r * snd r')
        | PCall P _ _ =>
            match L with
            | O => (0, 0)
            | S L' =>
                match nth_error D P with
                | Some d => let r := costL L' (body d) in (1 + fst r, snd r)
                | None => (1, 0)
                end
            end
        end.

  (** Unfolding equations of [cost] (its outer recursion is on [n]). *)
  Lemma cost_var : forall n L x, cost n L (PVar x) = (1, 1).
  Proof. destruct n, L; reflexivity. Qed.
  Lemma cost_app_0 : forall L f ps,
    cost 0 L (PApp f ps) = (1, match ps with [] => 1 | _ :: _ => 0 end).
  Proof. destruct L; reflexivity. Qed.
  Lemma cost_app_S : forall n L f ps,
    cost (S n) L (PApp f ps) =
      (1 + fst (seq_cost (cost n LMAX) ps), snd (seq_cost (cost n LMAX) ps)).
  Proof. destruct L; reflexivity. Qed.
  Lemma cost_funvar_0 : forall L F ps,
    cost 0 L (PFunVar F ps) = (1, match ps with [] => 1 | _ :: _ => 0 end).
  Proof. destruct L; reflexivity. Qed.
  Lemma cost_funvar_S : forall n L F ps,
    cost (S n) L (PFunVar F ps) =
      (1 + fst (seq_cost (cost n LMAX) ps), snd (seq_cost (cost n LMAX) ps)).
  Proof. destruct L; reflexivity. Qed.
  Lemma cost_alt : forall n L p1 p2,
    cost n L (PAlt p1 p2) =
      (1 + fst (cost n L p1) + fst (cost n L p2), snd (cost n L p1) + snd (cost n L p2)).
  Proof. destruct n, L; reflexivity. Qed.
  Lemma cost_guard : forall n L p g,
    cost n L (PGuard p g) = (1 + fst (cost n L p) + snd (cost n L p), snd (cost n L p)).
  Proof. destruct n, L; reflexivity. Qed.
  Lemma cost_exists : forall n L x p,
    cost n L (PExists x p) = (1 + fst (cost n L p) + snd (cost n L p), snd (cost n L p)).
  Proof. destruct n, L; reflexivity. Qed.
  Lemma cost_existsf : forall n L F p,
    cost n L (PExistsF F p) = (1 + fst (cost n L p) + snd (cost n L p), snd (cost n L p)).
  Proof. destruct n, L; reflexivity. Qed.
  Lemma cost_constr : forall n L p p' x,
    cost n L (PConstr p p' x) =
      (1 + fst (cost n L p) + snd (cost n L p) * (1 + fst (cost n L p')),
       snd (cost n L p) * snd (cost n L p')).
  Proof. destruct n, L; reflexivity. Qed.
  Lemma cost_call_0 : forall n P xs Fs, cost n 0 (PCall P xs Fs) = (0, 0).
  Proof. destruct n; reflexivity. Qed.
  Lemma cost_call_S : forall n L P xs Fs,
    cost n (S L) (PCall P xs Fs) =
      match nth_error D P with
      | Some d => (1 + fst (cost n L (body d)), snd (cost n L (body d)))
      | None => (1, 0)
      end.
  Proof. destruct n, L; reflexivity. Qed.

  (** The fuel that suffices for a root pattern [p] at depth at most [n]. *)
  Definition fuel_bound (n : nat) (p : pattern) : nat :=
    fst (cost n LMAX p) + snd (cost n LMAX p).
End Class.

(** ** The machine, step by step *)

Section Proof.
  Variable G : graph.
  Variable D : list pdef.

  Fixpoint exec (j : nat) (st : state) : state :=
    match j with O => st | S j' => exec j' (step_fn G D st) end.

  Lemma exec_add : forall j1 j2 st, exec (j1 + j2) st = exec j2 (exec j1 st).
  Proof. induction j1 as [|j1 IH]; intros j2 st; simpl; auto. Qed.

  Lemma exec_success : forall j Θ Φ, exec j (Success Θ Φ) = Success Θ Φ.
  Proof. induction j as [|j IH]; intros; simpl; auto. Qed.

  (** From [st], within [B] steps the machine succeeds or gives up to [stk]
      (backtracks into its top frame, or fails when it is empty). *)
  Definition reach (B : nat) (stk : list frame) (st : state) : Prop :=
    exists j, j <= B /\
      ((exists Θ Φ, exec j st = Success Θ Φ) \/ (exists nf, exec j st = backtrack nf stk)).

  Lemma reach_mono : forall B B' stk st, B <= B' -> reach B stk st -> reach B' stk st.
  Proof. intros B B' stk st Hle (j & Hj & H). exists j. split; [lia | exact H]. Qed.

  Lemma reach_step : forall B stk st, reach B stk (step_fn G D st) -> reach (S B) stk st.
  Proof. intros B stk st (j & Hj & H). exists (S j). split; [lia | exact H]. Qed.

  Lemma reach_step' : forall B B' stk st,
    S B <= B' -> reach B stk (step_fn G D st) -> reach B' stk st.
  Proof. intros B B' stk st Hle H. eapply reach_mono; [exact Hle | apply reach_step; exact H]. Qed.

  Lemma reach_backtrack : forall B nf stk, reach B stk (backtrack nf stk).
  Proof. intros. exists 0. split; [lia | right; exists nf; reflexivity]. Qed.

  (** Gave up to [stk1], then from its top frame within [B2] steps. *)
  Lemma reach_then : forall B1 B2 stk1 stk st,
    reach B1 stk1 st -> (forall nf, reach B2 stk (backtrack nf stk1)) ->
    reach (B1 + B2) stk st.
  Proof.
    intros B1 B2 stk1 stk st (j1 & Hj1 & [(Θ & Φ & H)|(nf & H)]) H2.
    - exists j1. split; [lia | left; eauto].
    - destruct (H2 nf) as (j2 & Hj2 & H3). exists (j1 + j2). split; [lia|].
      rewrite exec_add, H. exact H3.
  Qed.

  (** The variables [p] binds are bound, in [Θ] through [ρ], to nodes of
      depth at most [n]. *)
  Definition post (p : pattern) (ρ : env) (n : nat) (Θ : subst) : Prop :=
    forall x, In x (binds D p) -> exists s, tsub Θ ρ x = Some s /\ depth_le G n s.

  Lemma post_sub : forall p ρ n Θ Θ', sub Θ Θ' -> post p ρ n Θ -> post p ρ n Θ'.
  Proof.
    intros p ρ n Θ Θ' Hs H x Hx. destruct (H x Hx) as (s & Hxs & Hd).
    exists s. split; [apply (sub_gsub Θ Θ' (tenv ρ) Hs); exact Hxs | exact Hd].
  Qed.

  (** What [p]'s continuation [k] must do: from every state [p] hands it,
      succeed or give up to the stack it was given within [B] steps. *)
  Definition kont (p : pattern) (ρ : env) (n : nat) (Θ : subst) (k : cont) (B : nat) : Prop :=
    forall Θ' Φ' nf' stk', sub Θ Θ' -> post p ρ n Θ' ->
      reach B stk' (Running Θ' Φ' nf' stk' k).

  Definition Pr (n L : nat) (p : pattern) : Prop :=
    ug D L p = true -> args_ok D p = true -> wfb D p = true ->
    forall t ρ k B Θ Φ nf stk, depth_le G n t -> kont p ρ n Θ k B ->
      reach (fst (cost D n L p) + snd (cost D n L p) * B) stk
            (Running Θ Φ nf stk (AMatch p t ρ :: k)).

  Variable HD : wf_defs D = true.
  Variable Hdesc : descending D = true.

  Lemma desc_body : forall P d, nth_error D P = Some d ->
    ug D (LMAX D) (body d) = true /\ args_ok D (body d) = true.
  Proof.
    intros P d HP. unfold descending in Hdesc. rewrite forallb_forall in Hdesc.
    apply andb_true_iff. apply Hdesc. eapply nth_error_In. exact HP.
  Qed.

  (** The children of an operator application, one after the other. *)
  Lemma seq_sound : forall n', (forall L q, Pr n' L q) ->
    forall ps ts ρ k B Θ Φ nf stk,
      length ps = length ts -> (forall c, In c ts -> depth_le G n' c) ->
      forallb (fun q => ug D (LMAX D) q && args_ok D q) ps = true ->
      forallb (wfb D) ps = true ->
      (forall Θ' Φ' nf' stk', sub Θ Θ' ->
         (forall x, In x (flat_map (binds D) ps) ->
            exists s, tsub Θ' ρ x = Some s /\ depth_le G n' s) ->
         reach B stk' (Running Θ' Φ' nf' stk' k)) ->
      reach (fst (seq_cost (cost D n' (LMAX D)) ps)
             + snd (seq_cost (cost D n' (LMAX D)) ps) * B) stk
            (Running Θ Φ nf stk (push_matches ps ts ρ k)).
  Proof.
    intros n' IH. induction ps as [|p ps IHps];
      intros ts ρ k B Θ Φ nf stk Hlen Hts Hok Hwf Hk.
    - destruct ts; [|discriminate]. simpl.
      eapply reach_mono; [|apply Hk; [apply sub_refl | intros x []]]. lia.
    - destruct ts as [|t ts]; [discriminate|]. simpl in Hlen, Hok, Hwf |- *.
      apply andb_true_iff in Hok as [Hp Hok]. apply andb_true_iff in Hp as [Hug Hargs].
      apply andb_true_iff in Hwf as [Hwp Hwf].
      set (r1 := cost D n' (LMAX D) p).
      set (r2 := seq_cost (cost D n' (LMAX D)) ps).
      eapply reach_mono; [|apply (IH (LMAX D) p Hug Hargs Hwp t ρ _
                                    (fst r2 + snd r2 * B))].
      + unfold r1. nia.
      + apply Hts. left. reflexivity.
      + intros Θ1 Φ1 nf1 stk1 Hs1 Hpost1. apply IHps; auto.
        * intros c Hc. apply Hts. right. exact Hc.
        * intros Θ2 Φ2 nf2 stk2 Hs2 Hpost2. apply Hk; [eapply sub_trans; eauto|].
          intros x Hx. apply in_app_or in Hx as [Hx|Hx]; [|auto].
          apply (post_sub p ρ n' Θ1 Θ2 Hs2 Hpost1 x Hx).
  Qed.

  (** One case per pattern form, at a fixed depth [n] and unfolding [L];
      the children's case ([n = S n']) and the callee's ([L = S L']) are
      hypotheses. *)
  Lemma cost_sound_pat : forall n L,
    (forall n', n = S n' -> forall L' q, Pr n' L' q) ->
    (forall L', L = S L' -> forall q, Pr n L' q) ->
    forall p, Pr n L p.
  Proof.
    intros n L IHn IHL p. induction p as [x|f ps|p1 IH1 p2 IH2|p IHp g|x p IHp|F p IHp
                                          |p IHp p' IHp' x|F ps|P xs Fs];
      intros Hug Hargs Hwf t ρ k B Θ Φ nf stk Ht Hk.
    - (* PVar *)
      apply (reach_step' B); [rewrite cost_var; cbn; lia|]. cbn [step_fn].
      destruct (vfind x (tenv ρ)) as [s|] eqn:Hv; [|apply reach_backtrack].
      destruct (lookup s Θ) as [t'|] eqn:Hl.
      + destruct (Nat.eqb t' t) eqn:He; [|apply reach_backtrack].
        apply Nat.eqb_eq in He. subst t'.
        apply Hk; [apply sub_refl|]. intros y [<-|[]]. exists t. split; [|exact Ht].
        unfold tsub, gsub. rewrite Hv. exact Hl.
      + apply Hk; [apply sub_extend; exact Hl|]. intros y [<-|[]]. exists t.
        split; [|exact Ht]. unfold tsub, gsub. rewrite Hv. apply lookup_extend_eq.
    - (* PApp *)
      destruct n as [|n'].
      + simpl in Ht. rewrite cost_app_0. destruct ps as [|q ps].
        * apply (reach_step' B); [cbn; lia|]. cbn [step_fn]. rewrite Ht.
          destruct (Nat.eqb (label G t) f); cbn; [|apply reach_backtrack].
          apply Hk; [apply sub_refl | intros y []].
        * apply (reach_step' 0); [cbn; lia|]. cbn [step_fn]. rewrite Ht.
          rewrite andb_false_r. apply reach_backtrack.
      + rewrite cost_app_S. set (r := seq_cost (cost D n' (LMAX D)) ps). cbn [fst snd].
        apply (reach_step' (fst r + snd r * B)); [lia|]. cbn [step_fn].
        destruct (Nat.eqb (label G t) f && Nat.eqb (length ps) (length (children G t)))
          eqn:Hc; [|apply reach_backtrack].
        apply andb_true_iff in Hc as [_ Hc]. apply Nat.eqb_eq in Hc.
        apply (seq_sound n' (IHn n' eq_refl)); auto.
        intros Θ' Φ' nf' stk' Hs Hpost. apply Hk; auto.
        intros y Hy. destruct (Hpost y Hy) as (s & Hs1 & Hs2). exists s.
        split; [exact Hs1 | apply depth_le_S; exact Hs2].
    - (* PAlt *)
      rewrite ug_alt in Hug. simpl in Hargs, Hwf.
      apply andb_true_iff in Hug as [Hug1 Hug2]. apply andb_true_iff in Hargs as [Ha1 Ha2].
      apply andb_true_iff in Hwf as [Hw1 Hw2].
      rewrite cost_alt. set (r1 := cost D n L p1). set (r2 := cost D n L p2). cbn [fst snd].
      apply (reach_step' ((fst r1 + snd r1 * B) + (fst r2 + snd r2 * B))); [nia|].
      cbn [step_fn].
      eapply reach_then; [apply (IH1 Hug1 Ha1 Hw1 t ρ k B); auto|].
      + intros Θ' Φ' nf' stk' Hs Hpost. apply Hk; auto.
        intros y Hy. apply In_inter in Hy as [Hy _]. auto.
      + intros nf'. simpl. apply (IH2 Hug2 Ha2 Hw2 t ρ k B); auto.
        intros Θ' Φ' nf'' stk' Hs Hpost. apply Hk; auto.
        intros y Hy. apply In_inter in Hy as [_ Hy]. auto.
    - (* PGuard *)
      rewrite ug_guard in Hug. simpl in Hargs, Hwf. apply andb_true_iff in Hwf as [Hwf _].
      apply andb_true_iff in Hwf as [Hwf _].
      rewrite cost_guard. set (r := cost D n L p). cbn [fst snd].
      apply (reach_step' (fst r + snd r * S B)); [nia|]. cbn [step_fn]. apply IHp; auto.
      intros Θ' Φ' nf' stk' Hs Hpost. apply reach_step. cbn [step_fn].
      destruct (eval_guard G (tsub Θ' ρ) (fsub Φ' ρ) g) as [[|]|];
        try apply reach_backtrack.
      apply Hk; auto.
    - (* PExists *)
      rewrite ug_exists in Hug. simpl in Hargs, Hwf. apply andb_true_iff in Hwf as [Hwf _].
      rewrite cost_exists. set (r := cost D n L p). cbn [fst snd].
      apply (reach_step' (fst r + snd r * S B)); [nia|]. cbn [step_fn]. apply IHp; auto.
      intros Θ' Φ' nf' stk' Hs Hpost. apply reach_step. cbn [step_fn].
      destruct (lookup nf Θ') eqn:Hl; [|apply reach_backtrack].
      apply Hk; auto. intros y Hy. simpl in Hy. apply In_remove_var in Hy as [Hy Hne].
      destruct (Hpost y Hy) as (s & Hs1 & Hs2). exists s. split; [|exact Hs2].
      rewrite tsub_add_t in Hs1. apply Nat.eqb_neq in Hne. rewrite Hne in Hs1. exact Hs1.
    - (* PExistsF *)
      rewrite ug_existsf in Hug. simpl in Hargs, Hwf. apply andb_true_iff in Hwf as [Hwf _].
      rewrite cost_existsf. set (r := cost D n L p). cbn [fst snd].
      apply (reach_step' (fst r + snd r * S B)); [nia|]. cbn [step_fn]. apply IHp; auto.
      intros Θ' Φ' nf' stk' Hs Hpost. apply reach_step. cbn [step_fn].
      destruct (lookup nf Φ') eqn:Hl; [|apply reach_backtrack].
      apply Hk; auto.
    - (* PConstr *)
      rewrite ug_constr in Hug. simpl in Hargs, Hwf.
      apply andb_true_iff in Hug as [Hug1 Hug2]. apply andb_true_iff in Hargs as [Ha1 Ha2].
      apply andb_true_iff in Hwf as [Hwf Hx]. apply andb_true_iff in Hwf as [Hw1 Hw2].
      apply memb_In in Hx.
      rewrite cost_constr. set (r := cost D n L p). set (r' := cost D n L p'). cbn [fst snd].
      apply (reach_step' (fst r + snd r * S (fst r' + snd r' * B))); [nia|].
      cbn [step_fn]. apply IHp; auto.
      intros Θ1 Φ1 nf1 stk1 Hs1 Hpost1. apply reach_step. cbn [step_fn].
      destruct (Hpost1 x Hx) as (s & Hxs & Hds). rewrite Hxs.
      apply IHp'; auto.
      intros Θ2 Φ2 nf2 stk2 Hs2 Hpost2. apply Hk; [eapply sub_trans; eauto|].
      intros y Hy. simpl in Hy. apply in_app_or in Hy as [Hy|Hy]; [|auto].
      apply (post_sub p ρ n Θ1 Θ2 Hs2 Hpost1 y Hy).
    - (* PFunVar *)
      destruct n as [|n'].
      + simpl in Ht. rewrite cost_funvar_0. destruct ps as [|q ps].
        * apply (reach_step' B); [cbn; lia|]. cbn [step_fn]. rewrite Ht.
          cbn. destruct (vfind F (fenv ρ)) as [s|]; [|apply reach_backtrack].
          destruct (lookup s Φ) as [f|].
          -- destruct (Nat.eqb f (label G t)); [|apply reach_backtrack].
             apply Hk; [apply sub_refl | intros y []].
          -- apply Hk; [apply sub_refl | intros y []].
        * apply (reach_step' 0); [cbn; lia|]. cbn [step_fn]. rewrite Ht.
          cbn. apply reach_backtrack.
      + rewrite cost_funvar_S. set (r := seq_cost (cost D n' (LMAX D)) ps). cbn [fst snd].
        apply (reach_step' (fst r + snd r * B)); [lia|]. cbn [step_fn].
        destruct (Nat.eqb (length ps) (length (children G t))) eqn:Hc; simpl;
          [|apply reach_backtrack].
        apply Nat.eqb_eq in Hc.
        assert (Hk' : forall Θ' Φ' nf' stk', sub Θ Θ' ->
                  (forall x, In x (flat_map (binds D) ps) ->
                     exists s, tsub Θ' ρ x = Some s /\ depth_le G n' s) ->
                  reach B stk' (Running Θ' Φ' nf' stk' k)).
        { intros Θ' Φ' nf' stk' Hs Hpost. apply Hk; auto.
          intros y Hy. destruct (Hpost y Hy) as (s & Hs1 & Hs2). exists s.
          split; [exact Hs1 | apply depth_le_S; exact Hs2]. }
        destruct (vfind F (fenv ρ)) as [s|]; [|apply reach_backtrack].
        destruct (lookup s Φ) as [f|].
        * destruct (Nat.eqb f (label G t)); [|apply reach_backtrack].
          apply (seq_sound n' (IHn n' eq_refl)); auto.
        * apply (seq_sound n' (IHn n' eq_refl)); auto.
    - (* PCall *)
      destruct L as [|L']; [simpl in Hug; discriminate|].
      cbn [ug] in Hug. rewrite cost_call_S.
      destruct (nth_error D P) as [d|] eqn:HP.
      + set (r := cost D n L' (body d)). cbn [fst snd].
        apply (reach_step' (fst r + snd r * B)); [lia|]. cbn [step_fn]. rewrite HP.
        destruct (Nat.eqb (length xs) (nparams d) && Nat.eqb (length Fs) (nfparams d));
          [|apply reach_backtrack].
        destruct (desc_body P d HP) as [_ Hargs'].
        destruct (wf_defs_body D HD P d HP) as (Hwf' & Hpb & _).
        apply (IHL L' eq_refl (body d) Hug Hargs' Hwf'); auto.
        intros Θ' Φ' nf' stk' Hs Hpost. apply Hk; auto.
        intros y Hy. simpl in Hy. rewrite HP in Hy.
        apply In_args_of in Hy as (i & Hi & Hxi).
        destruct (Hpost i (Hpb i Hi)) as (s & Hs1 & Hs2). exists s. split; [|exact Hs2].
        unfold tsub in Hs1 |- *. simpl in Hs1. rewrite gsub_call_map in Hs1.
        unfold call_sub in Hs1. rewrite Hxi in Hs1. exact Hs1.
      + apply (reach_step' 0); [cbn; lia|]. cbn [step_fn]. rewrite HP.
        apply reach_backtrack.
  Qed.

  Lemma cost_sound : forall n L p, Pr n L p.
  Proof.
    induction n as [|n IHn].
    - induction L as [|L IHL]; intros p; apply cost_sound_pat;
        intros; try discriminate; match goal with H : S _ = S _ |- _ => injection H end;
        intros; subst; auto.
    - induction L as [|L IHL]; intros p; apply cost_sound_pat;
        intros n' Hn'; try (injection Hn'; intros; subst; auto); discriminate.
  Qed.

  (** [OOutOfFuel] only when fewer steps than the machine needs. *)
  Lemma exec_run : forall j st fuel,
    j <= fuel ->
    (exists Θ Φ, exec j st = Success Θ Φ) \/ exec j st = Failure ->
    run G D fuel st <> OOutOfFuel.
  Proof.
    induction j as [|j IH]; intros st fuel Hj H.
    - simpl in H. destruct H as [(Θ & Φ & ->)| ->]; destruct fuel; discriminate.
    - destruct fuel as [|fuel]; [lia|].
      destruct st as [Θ Φ nf stk k|Θ Φ|].
      + cbn [run]. apply (IH _ fuel); [lia | exact H].
      + discriminate.
      + discriminate.
  Qed.

  (** The fuel that suffices: a well-formed descending pattern at a node of
      depth at most [N] never runs out of [fuel_bound D N p] steps. *)
  Theorem match_pattern_fuel : forall N fuel n m p t,
    wfb D p = true -> ug D (LMAX D) p = true -> args_ok D p = true ->
    depth_le G N t -> fuel_bound D N p <= fuel ->
    match_pattern G D fuel n m p t <> OOutOfFuel.
  Proof.
    intros N fuel n m p t Hwf Hug Hargs Ht Hle. unfold match_pattern, init.
    assert (Hr : reach (fst (cost D N (LMAX D) p) + snd (cost D N (LMAX D) p) * 1) []
                   (Running empty empty (max n m) []
                      [AMatch p t (mkEnv (ident_map n) (ident_map m))])).
    { apply (cost_sound N (LMAX D) p Hug Hargs Hwf); auto.
      intros Θ' Φ' nf' stk' _ _. exists 1. split; [lia|]. left. simpl. eauto. }
    destruct Hr as (j & Hj & [HS|(nf & HF)]).
    - apply (exec_run j); [unfold fuel_bound in Hle; lia | left; exact HS].
    - apply (exec_run j); [unfold fuel_bound in Hle; lia | right; exact HF].
  Qed.
End Proof.

(** The library's entry point: a root of a descending table never runs out
    of fuel at a node of depth at most [N], given [fuel_bound D N] of its
    body. *)
Theorem match_root_fuel : forall G D N fuel r t d,
  wf_defs D = true -> descending D = true -> nth_error D r = Some d ->
  depth_le G N t -> fuel_bound D N (body d) <= fuel ->
  match_root G D fuel r t <> ROutOfFuel.
Proof.
  intros G D N fuel r t d HD Hdesc Hr Ht Hle. unfold match_root. rewrite Hr.
  destruct (admits G t (ri_find (root_index D) r)); [|discriminate].
  destruct (wf_defs_body D HD r d Hr) as (Hwf & _ & _).
  destruct (desc_body D Hdesc r d Hr) as [Hug Hargs].
  pose proof (match_pattern_fuel G D HD Hdesc N fuel (nparams d) (nfparams d) (body d) t
                Hwf Hug Hargs Ht Hle) as H.
  unfold answer_of. destruct (match_pattern G D fuel _ _ (body d) t); congruence.
Qed.

(** Completeness for descending tables: a root that matches declaratively
    at a node of depth at most [N] (under a substitution of its parameters
    only) gets a match from [match_root] with [fuel_bound D N] of its body,
    neither [RNoMatch] ([match_root_fail_sound]) nor [ROutOfFuel]
    ([match_root_fuel]). *)
Corollary match_root_fuel_complete : forall G D N fuel r t d σ ψ,
  wf_defs D = true -> descending D = true -> nth_error D r = Some d ->
  depth_le G N t -> fuel_bound D N (body d) <= fuel ->
  (forall x, nparams d <= x -> σ x = None) -> (forall F, nfparams d <= F -> ψ F = None) ->
  matches G D σ ψ (body d) t ->
  exists bs fbs, match_root G D fuel r t = RMatch bs fbs.
Proof.
  intros G D N fuel r t d σ ψ HD Hdesc Hr Ht Hle Hσ Hψ Hm.
  destruct (match_root G D fuel r t) as [bs fbs| |] eqn:Ha.
  - exists bs, fbs. reflexivity.
  - exfalso. exact (match_root_fail_sound G D fuel r t d HD Hr Ha σ ψ Hσ Hψ Hm).
  - exfalso. exact (match_root_fuel G D N fuel r t d HD Hdesc Hr Ht Hle Ha).
Qed.

(** The same for any substitution: [wf_defs] checks scope, so a match under
    any substitution is one under its restriction to the parameters
    ([matches_params]). *)
Corollary match_root_fuel_complete_any : forall G D N fuel r t d σ ψ,
  wf_defs D = true -> descending D = true -> nth_error D r = Some d ->
  depth_le G N t -> fuel_bound D N (body d) <= fuel ->
  matches G D σ ψ (body d) t ->
  exists bs fbs, match_root G D fuel r t = RMatch bs fbs.
Proof.
  intros G D N fuel r t d σ ψ HD Hdesc Hr Ht Hle Hm.
  apply (match_root_fuel_complete G D N fuel r t d
           (restrict (fun x => Nat.ltb x (nparams d)) σ)
           (restrict (fun F => Nat.ltb F (nfparams d)) ψ) HD Hdesc Hr Ht Hle);
    [intros; apply restrict_below; assumption | intros; apply restrict_below; assumption |].
  eapply matches_params; eauto.
Qed.
