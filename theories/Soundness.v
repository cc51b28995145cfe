(** * Soundness of the algorithmic semantics (the paper's Theorem 2), full calculus

    - [success_soundness]: [running(∅, ∅, [], [match(p, t)]) ↦* success(θ, φ)]
      implies [p @ ⟨θ, φ⟩ ≈ t] (θ, φ read through the root's scope);
    - [failure_soundness]: [running(∅, ∅, [], [match(p, t)]) ↦* failure]
      implies that no substitution of the root's variables matches
      (for well-formed patterns and definitions, see [Syntax.wfb]);
    - [match_pattern_sound], [match_pattern_fail_sound]: the same for the
      extracted function, through the refinement theorems of [Interpreter.v].

    Both proofs use one invariant: "a branch can be completed": θ ⊆ θ',
    φ ⊆ φ' and every pending action holds under ⟨θ', φ'⟩, for the current
    branch or for a saved backtrack frame. For success it is preserved
    backwards along each step, for a fixed final ⟨θ', φ'⟩. For failure it is
    preserved forwards with ⟨θ', φ'⟩ chosen anew at each step: an [∃x] moves
    [x] to a fresh slot [nf], and the witness of P-EXISTS is stored there;
    since every slot the state mentions is below [nf] ([inv]), the rest
    of the state cannot see the difference. [wfk] carries well-formedness:
    guards, [checkName] and [matchConstr] only read slots that are bound by
    the time they run.

    Structure: one lemma per rule.

    Three inductions go over the machine's step relation [step]
    (Figures 7, 17, 18): [ssol_step_back] (success, backwards), [inv_step]
    (freshness and well-formedness, forwards) and [fsol_step] (failure,
    forwards). Each is a list of one-line dispatches, one per constructor of
    [step], to a lemma that handles that rule alone and is stated with the
    rule's own premises:

    - [success_step_R : premises of R -> ssol Θ' Φ' st' -> ssol Θ' Φ' st]
    - [inv_step_R     : premises of R -> inv st -> inv st']
    - [fail_step_R    : premises of R -> inv st -> fsol st -> fsol st']

    for [R : st ↦ st']; the table gives [R] for each rule of [step] (paper
    names; the constructors are in [Algorithmic.v] and
    docs/guarantees/correspondence.md). The cases of the declarative rules (Figure 16)
    that the failure proof needs are the inversion lemmas [matches_inv_X],
    one per pattern form.

<<<
    | rule                      | success_step_…      | inv_step_…          | fail_step_…           |
    |---------------------------|---------------------|---------------------|-----------------------|
    | ST-SUCCESS                | success             | success             | success               |
    | ST-MATCH-VAR-BIND         | var_bind            | var_bind            | var_bind              |
    | ST-MATCH-VAR-BOUND        | var_bound           | var_bound           | var_bound             |
    | ST-MATCH-VAR-CONFLICT     | backtrack           | backtrack           | var_conflict          |
    | ST-MATCH-FUN              | fun                 | fun                 | fun                   |
    | ST-MATCH-FUN-CONFLICT     | backtrack           | backtrack           | fun_conflict          |
    | ST-MATCH-ALT              | alt                 | alt                 | alt                   |
    | ST-MATCH-GUARD            | guard               | guard               | guard                 |
    | ST-CHECKGUARD-CONTINUE    | checkguard_continue | checkguard_continue | checkguard_continue   |
    | ST-CHECKGUARD-BACKTRACK   | backtrack           | backtrack           | checkguard_backtrack  |
    | ST-MATCH-EXISTS           | exists              | exists              | exists                |
    | ST-MATCH-EXISTS for ∃F    | existsf             | existsf             | existsf               |
    | ST-CHECKNAME              | checkname           | checkname           | checkname             |
    | ST_CheckName_Backtrack    | backtrack           | backtrack           | checkname_backtrack   |
    | ST_CheckFName             | checkfname          | checkfname          | checkfname            |
    | ST_CheckFName_Backtrack   | backtrack           | backtrack           | checkfname_backtrack  |
    | ST-MATCH-MATCHCONSTR      | match_matchconstr   | match_matchconstr   | match_matchconstr     |
    | ST-MATCHCONSTR            | matchconstr         | matchconstr         | matchconstr           |
    | ST_MatchConstr_Backtrack  | backtrack           | backtrack           | matchconstr_backtrack |
    | ST-MATCH-FUN-VAR-BIND     | funvar_bind         | funvar_bind         | funvar_bind           |
    | ST-MATCH-FUN-VAR-BOUND    | funvar_bound        | funvar_bound        | funvar_bound          |
    | ST-MATCH-FUN-VAR-CONFLICT | backtrack           | backtrack           | funvar_conflict       |
    | ST-MATCH-MU               | mu                  | mu                  | mu                    |
    | ST_Match_Mu_Conflict      | backtrack           | backtrack           | mu_conflict           |
>>>

    Every rule that backtracks shares [success_step_backtrack] and
    [inv_step_backtrack] (neither depends on why the branch was dropped);
    its failure lemma shows that the dropped branch cannot be completed.
    Inversion of Figure 16 ([matches_inv_X], used by the failure lemmas):
    P-VAR [matches_inv_var], P-FUN [matches_inv_fun], P-ALT-1/2
    [matches_inv_alt], P-GUARD [matches_inv_guard], P-EXISTS
    [matches_inv_exists] (and [matches_inv_existsf]), P-MATCHCONSTR
    [matches_inv_constr], P-FUN-VAR [matches_inv_funvar], P-MU
    [matches_inv_mu].

    A new rule [R] of [step] needs [success_step_R], [inv_step_R] and
    [fail_step_R] (or the shared backtrack lemmas) and one line in each of
    the three dispatches, at the position of [R] among the constructors; a
    new pattern form also needs its [matches_inv_X]. No proof mentions a
    hypothesis name that Coq generated or lists the constructors of
    [matches] or [step] in an intro pattern, so no existing lemma changes
    (unless the rule pushes a new kind of [action]: then [holds], [wfk],
    [action_below] and their lemmas get a case). *)

From Coq Require Import ZArith List Bool Arith Lia.
From PyPM Require Import Syntax Subst Declarative Env Algorithmic Interpreter.
Import ListNotations.

Section Soundness.
  Variable G : graph.
  Variable D : list pdef.

  Definition holds (Θ Φ : subst) (a : action) : Prop :=
    match a with
    | AMatch p t ρ => matches G D (tsub Θ ρ) (fsub Φ ρ) p t
    | AGuard g ρ => eval_guard G (tsub Θ ρ) (fsub Φ ρ) g = Some true
    | ACheckName s => lookup s Θ <> None
    | ACheckFName s => lookup s Φ <> None
    | AMatchConstr p x ρ =>
        exists t, tsub Θ ρ x = Some t /\ matches G D (tsub Θ ρ) (fsub Φ ρ) p t
    end.

  Definition branch_sol (Θ' Φ' Θ Φ : subst) (k : cont) : Prop :=
    sub Θ Θ' /\ sub Φ Φ' /\ Forall (holds Θ' Φ') k.

  Definition frame_sol (Θ' Φ' : subst) (fr : frame) : Prop :=
    branch_sol Θ' Φ' (fst (fst fr)) (snd (fst fr)) (snd fr).

  Lemma sub_gsub : forall Θ Θ' m, sub Θ Θ' -> ext (gsub Θ m) (gsub Θ' m).
  Proof.
    unfold sub, ext, gsub. intros Θ Θ' m H x v. destruct (vfind x m); auto.
  Qed.

  Lemma tsub_var : forall Θ ρ x t,
    tsub Θ ρ x = Some t -> exists s, vfind x (tenv ρ) = Some s /\ lookup s Θ = Some t.
  Proof.
    unfold tsub, gsub. intros Θ ρ x t Hx.
    destruct (vfind x (tenv ρ)) as [s|]; [exists s; split; [reflexivity|exact Hx]|discriminate].
  Qed.

  Lemma fsub_var : forall Φ ρ F f,
    fsub Φ ρ F = Some f -> exists s, vfind F (fenv ρ) = Some s /\ lookup s Φ = Some f.
  Proof.
    unfold fsub, gsub. intros Φ ρ F f HF.
    destruct (vfind F (fenv ρ)) as [s|]; [exists s; split; [reflexivity|exact HF]|discriminate].
  Qed.

  Lemma Forall_push : forall Θ Φ ps ts ρ k,
    matches_list G D (tsub Θ ρ) (fsub Φ ρ) ps ts -> Forall (holds Θ Φ) k ->
    Forall (holds Θ Φ) (push_matches ps ts ρ k).
  Proof.
    intros Θ Φ ps. induction ps as [|p ps IH]; intros ts ρ k Hps Hk;
      inversion Hps as [|σ ψ p' ps' t ts' Hp Hps']; subst; simpl; [exact Hk|].
    constructor; [exact Hp | apply IH; [exact Hps' | exact Hk]].
  Qed.

  Lemma Forall_push_inv : forall Θ Φ ps ts ρ k,
    length ps = length ts -> Forall (holds Θ Φ) (push_matches ps ts ρ k) ->
    matches_list G D (tsub Θ ρ) (fsub Φ ρ) ps ts /\ Forall (holds Θ Φ) k.
  Proof.
    intros Θ Φ ps. induction ps as [|p ps IH]; intros ts ρ k Hl H;
      destruct ts as [|t ts]; simpl in *; try discriminate.
    - split; [apply ML_Nil | exact H].
    - apply Forall_cons_iff in H as [Hp Hrest]. injection Hl as Hl.
      destruct (IH ts ρ k Hl Hrest) as [Hps Hk].
      split; [apply ML_Cons; [exact Hp | exact Hps] | exact Hk].
  Qed.

  Lemma matches_list_length : forall σ ψ ps ts,
    matches_list G D σ ψ ps ts -> length ps = length ts.
  Proof.
    intros σ ψ ps ts H.
    induction H as [σ ψ|σ ψ p ps t ts _ _ IH]; simpl; [reflexivity | rewrite IH; reflexivity].
  Qed.

  (** ** Inversion of the declarative rules (Figure 16), one per pattern form

      Each proof inverts without an intro pattern and closes by
      [assumption]/[eassumption]: an [inversion … as […]] pattern must list
      one branch per constructor of [matches], so a new rule would break
      every one of these lemmas; this way a new rule breaks none. *)

  Lemma matches_inv_var : forall σ ψ x t,
    matches G D σ ψ (PVar x) t -> σ x = Some t.
  Proof. intros σ ψ x t H. inversion H. assumption. Qed.

  Lemma matches_inv_fun : forall σ ψ f ps t,
    matches G D σ ψ (PApp f ps) t -> label G t = f /\ matches_list G D σ ψ ps (children G t).
  Proof. intros σ ψ f ps t H. inversion H. split; assumption. Qed.

  Lemma matches_inv_alt : forall σ ψ p1 p2 t,
    matches G D σ ψ (PAlt p1 p2) t -> matches G D σ ψ p1 t \/ matches G D σ ψ p2 t.
  Proof. intros σ ψ p1 p2 t H. inversion H; [left | right]; assumption. Qed.

  Lemma matches_inv_guard : forall σ ψ p g t,
    matches G D σ ψ (PGuard p g) t ->
    matches G D σ ψ p t /\ eval_guard G σ ψ g = Some true.
  Proof. intros σ ψ p g t H. inversion H. split; assumption. Qed.

  Lemma matches_inv_exists : forall σ ψ x p t,
    matches G D σ ψ (PExists x p) t -> exists t', matches G D (upd σ x t') ψ p t.
  Proof. intros σ ψ x p t H. inversion H. eexists. eassumption. Qed.

  Lemma matches_inv_existsf : forall σ ψ F p t,
    matches G D σ ψ (PExistsF F p) t -> exists f, matches G D σ (upd ψ F f) p t.
  Proof. intros σ ψ F p t H. inversion H. eexists. eassumption. Qed.

  Lemma matches_inv_constr : forall σ ψ p p' x t,
    matches G D σ ψ (PConstr p p' x) t ->
    exists t', matches G D σ ψ p t /\ σ x = Some t' /\ matches G D σ ψ p' t'.
  Proof.
    intros σ ψ p p' x t H. inversion H.
    eexists. split; [assumption | split; eassumption].
  Qed.

  Lemma matches_inv_funvar : forall σ ψ F ps t,
    matches G D σ ψ (PFunVar F ps) t ->
    ψ F = Some (label G t) /\ matches_list G D σ ψ ps (children G t).
  Proof. intros σ ψ F ps t H. inversion H. split; assumption. Qed.

  Lemma matches_inv_mu : forall σ ψ P xs Fs t,
    matches G D σ ψ (PCall P xs Fs) t ->
    exists d, nth_error D P = Some d /\ length xs = nparams d /\ length Fs = nfparams d /\
              matches G D (call_sub σ xs) (call_sub ψ Fs) (body d) t.
  Proof.
    intros σ ψ P xs Fs t H. inversion H.
    eexists. split; [eassumption | split; [assumption | split; assumption]].
  Qed.

  (** ** Success soundness *)

  Definition ssol (Θ' Φ' : subst) (st : state) : Prop :=
    match st with
    | Running Θ Φ _ stk k => branch_sol Θ' Φ' Θ Φ k \/ Exists (frame_sol Θ' Φ') stk
    | Success Θ Φ => Θ = Θ' /\ Φ = Φ'
    | Failure => False
    end.

  Lemma ssol_backtrack : forall Θ' Φ' nf stk,
    ssol Θ' Φ' (backtrack nf stk) -> Exists (frame_sol Θ' Φ') stk.
  Proof.
    intros Θ' Φ' nf stk H. destruct stk as [|[[Θ Φ] k] stk]; simpl in H.
    - destruct H.
    - destruct H as [H|H]; [apply Exists_cons_hd | apply Exists_cons_tl]; auto.
  Qed.

  Lemma tsub_add_t : forall Θ ρ x s y,
    tsub Θ (env_add_t ρ x s) y =
      if Nat.eqb x y then lookup s Θ else tsub Θ ρ y.
  Proof.
    intros Θ ρ x s y. unfold tsub, gsub. simpl. rewrite vfind_add.
    destruct (Nat.eqb x y); reflexivity.
  Qed.

  Lemma fsub_add_f : forall Φ ρ F s y,
    fsub Φ (env_add_f ρ F s) y =
      if Nat.eqb F y then lookup s Φ else fsub Φ ρ y.
  Proof.
    intros Φ ρ F s y. unfold fsub, gsub. simpl. rewrite vfind_add.
    destruct (Nat.eqb F y); reflexivity.
  Qed.

  (** The two shapes of a success case: a step that keeps the stack (the
      current branch's solution is pulled back), and a step that
      backtracks (the solution is in a frame of the stack). *)
  Lemma ssol_same_stack : forall Θ' Φ' Θ1 Φ1 nf1 k1 Θ2 Φ2 nf2 k2 stk,
    (branch_sol Θ' Φ' Θ2 Φ2 k2 -> branch_sol Θ' Φ' Θ1 Φ1 k1) ->
    ssol Θ' Φ' (Running Θ2 Φ2 nf2 stk k2) -> ssol Θ' Φ' (Running Θ1 Φ1 nf1 stk k1).
  Proof.
    intros Θ' Φ' Θ1 Φ1 nf1 k1 Θ2 Φ2 nf2 k2 stk Hback [Hsol|Hstk].
    - left. exact (Hback Hsol).
    - right. exact Hstk.
  Qed.

  Lemma branch_sol_cons : forall Θ' Φ' Θ Φ a k,
    sub Θ Θ' -> sub Φ Φ' -> holds Θ' Φ' a -> Forall (holds Θ' Φ') k ->
    branch_sol Θ' Φ' Θ Φ (a :: k).
  Proof.
    intros Θ' Φ' Θ Φ a k Hs Hf Ha Hk. split; [exact Hs | split; [exact Hf | constructor; assumption]].
  Qed.

  (** Every rule whose result is [backtrack nf stk]. *)
  Lemma success_step_backtrack : forall Θ' Φ' Θ Φ nf stk k,
    ssol Θ' Φ' (backtrack nf stk) -> ssol Θ' Φ' (Running Θ Φ nf stk k).
  Proof.
    intros Θ' Φ' Θ Φ nf stk k Hbt. right. exact (ssol_backtrack _ _ _ _ Hbt).
  Qed.

  (** ST-SUCCESS *)
  Lemma success_step_success : forall Θ' Φ' Θ Φ nf stk,
    ssol Θ' Φ' (Success Θ Φ) -> ssol Θ' Φ' (Running Θ Φ nf stk []).
  Proof.
    intros Θ' Φ' Θ Φ nf stk [HΘ HΦ]. subst Θ' Φ'. left.
    split; [apply sub_refl | split; [apply sub_refl | constructor]].
  Qed.

  (** ST-MATCH-VAR-BIND *)
  Lemma success_step_var_bind : forall Θ' Φ' Θ Φ nf stk x t ρ s k,
    vfind x (tenv ρ) = Some s -> lookup s Θ = None ->
    ssol Θ' Φ' (Running (extend s t Θ) Φ nf stk k) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk x t ρ s k Hx Hfree.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply branch_sol_cons; [| exact Hf | | exact Hk].
    - eapply sub_trans; [apply sub_extend; exact Hfree | exact Hs].
    - simpl. apply P_Var. unfold tsub, gsub. rewrite Hx. apply Hs, lookup_extend_eq.
  Qed.

  (** ST-MATCH-VAR-BOUND *)
  Lemma success_step_var_bound : forall Θ' Φ' Θ Φ nf stk x t ρ k,
    tsub Θ ρ x = Some t ->
    ssol Θ' Φ' (Running Θ Φ nf stk k) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk x t ρ k Hx.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk].
    simpl. apply P_Var. exact (sub_gsub _ _ _ Hs x t Hx).
  Qed.

  (** ST-MATCH-FUN *)
  Lemma success_step_fun : forall Θ' Φ' Θ Φ nf stk f ps t ρ k,
    label G t = f -> length ps = length (children G t) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (push_matches ps (children G t) ρ k)) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PApp f ps) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk f ps t ρ k Hlabel Hl.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    destruct (Forall_push_inv _ _ _ _ _ _ Hl Hk) as [Hps Hk'].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk'].
    simpl. apply P_Fun; [exact Hlabel | exact Hps].
  Qed.

  (** ST-MATCH-ALT: a solution of the first branch gives P-ALT-1, one of
      the saved frame P-ALT-2. *)
  Lemma success_step_alt : forall Θ' Φ' Θ Φ nf stk p1 p2 t ρ k,
    ssol Θ' Φ' (Running Θ Φ nf ((Θ, Φ, AMatch p2 t ρ :: k) :: stk) (AMatch p1 t ρ :: k)) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PAlt p1 p2) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk p1 p2 t ρ k [[Hs [Hf Hk]]|Hstk].
    - apply Forall_cons_iff in Hk as [Hm Hk']. left.
      apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk'].
      simpl. apply P_Alt1. exact Hm.
    - apply Exists_cons in Hstk as [Hfr|Hstk'].
      + destruct Hfr as [Hs [Hf Hk]]. simpl in Hs, Hf, Hk.
        apply Forall_cons_iff in Hk as [Hm Hk']. left.
        apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk'].
        simpl. apply P_Alt2. exact Hm.
      + right. exact Hstk'.
  Qed.

  (** ST-MATCH-GUARD *)
  Lemma success_step_guard : forall Θ' Φ' Θ Φ nf stk p g t ρ k,
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch p t ρ :: AGuard g ρ :: k)) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PGuard p g) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk p g t ρ k.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply Forall_cons_iff in Hk as [Hm Hk']. apply Forall_cons_iff in Hk' as [Hg Hk''].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk''].
    simpl. apply P_Guard; [exact Hm | exact Hg].
  Qed.

  (** ST-CHECKGUARD-CONTINUE: guards are monotone ([eval_guard_mono]). *)
  Lemma success_step_checkguard_continue : forall Θ' Φ' Θ Φ nf stk g ρ k,
    eval_guard G (tsub Θ ρ) (fsub Φ ρ) g = Some true ->
    ssol Θ' Φ' (Running Θ Φ nf stk k) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AGuard g ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk g ρ k Hg.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk].
    simpl. eapply eval_guard_mono; [apply sub_gsub; exact Hs | apply sub_gsub; exact Hf | exact Hg].
  Qed.

  (** ST-MATCH-EXISTS: the witness of P-EXISTS is the final value of slot
      [nf], bound there by the pending [checkName(nf)]. *)
  Lemma success_step_exists : forall Θ' Φ' Θ Φ nf stk x p t ρ k,
    ssol Θ' Φ' (Running Θ Φ (S nf) stk (AMatch p t (env_add_t ρ x nf) :: ACheckName nf :: k)) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PExists x p) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk x p t ρ k.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply Forall_cons_iff in Hk as [Hm Hk']. apply Forall_cons_iff in Hk' as [Hc Hk''].
    simpl in Hm, Hc. destruct (lookup nf Θ') as [t'|] eqn:Ht'; [|congruence].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk''].
    simpl. apply P_Exists with (t' := t').
    eapply matches_ext; [| | exact Hm].
    - intros y. rewrite tsub_add_t. unfold upd. destruct (Nat.eqb x y); [exact Ht' | reflexivity].
    - intros y. reflexivity.
  Qed.

  (** ST-MATCH-EXISTS for [∃F]. *)
  Lemma success_step_existsf : forall Θ' Φ' Θ Φ nf stk F p t ρ k,
    ssol Θ' Φ' (Running Θ Φ (S nf) stk (AMatch p t (env_add_f ρ F nf) :: ACheckFName nf :: k)) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PExistsF F p) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk F p t ρ k.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply Forall_cons_iff in Hk as [Hm Hk']. apply Forall_cons_iff in Hk' as [Hc Hk''].
    simpl in Hm, Hc. destruct (lookup nf Φ') as [f|] eqn:Hf'; [|congruence].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk''].
    simpl. apply P_ExistsF with (f := f).
    eapply matches_ext; [| | exact Hm].
    - intros y. reflexivity.
    - intros y. rewrite fsub_add_f. unfold upd. destruct (Nat.eqb F y); [exact Hf' | reflexivity].
  Qed.

  (** ST-CHECKNAME *)
  Lemma success_step_checkname : forall Θ' Φ' Θ Φ nf stk s k,
    lookup s Θ <> None ->
    ssol Θ' Φ' (Running Θ Φ nf stk k) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (ACheckName s :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk s k Hb.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk].
    simpl. destruct (lookup s Θ) as [v|] eqn:E; [|congruence].
    rewrite (Hs _ _ E). discriminate.
  Qed.

  (** ST-CHECKNAME for operator variables. *)
  Lemma success_step_checkfname : forall Θ' Φ' Θ Φ nf stk s k,
    lookup s Φ <> None ->
    ssol Θ' Φ' (Running Θ Φ nf stk k) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (ACheckFName s :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk s k Hb.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk].
    simpl. destruct (lookup s Φ) as [v|] eqn:E; [|congruence].
    rewrite (Hf _ _ E). discriminate.
  Qed.

  (** ST-MATCH-MATCHCONSTR *)
  Lemma success_step_match_matchconstr : forall Θ' Φ' Θ Φ nf stk p p' x t ρ k,
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch p t ρ :: AMatchConstr p' x ρ :: k)) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PConstr p p' x) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk p p' x t ρ k.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply Forall_cons_iff in Hk as [Hm Hk']. apply Forall_cons_iff in Hk' as [Hc Hk''].
    destruct Hc as [t' [Hx Hm']].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk''].
    simpl. eapply P_MatchConstr; [exact Hm | exact Hx | exact Hm'].
  Qed.

  (** ST-MATCHCONSTR *)
  Lemma success_step_matchconstr : forall Θ' Φ' Θ Φ nf stk p x ρ t k,
    tsub Θ ρ x = Some t ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch p t ρ :: k)) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatchConstr p x ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk p x ρ t k Hx.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply Forall_cons_iff in Hk as [Hm Hk'].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk'].
    simpl. exists t. split; [exact (sub_gsub _ _ _ Hs x t Hx) | exact Hm].
  Qed.

  (** ST-MATCH-FUN-VAR-BIND *)
  Lemma success_step_funvar_bind : forall Θ' Φ' Θ Φ nf stk F ps t ρ s k,
    vfind F (fenv ρ) = Some s -> lookup s Φ = None ->
    length ps = length (children G t) ->
    ssol Θ' Φ' (Running Θ (extend s (label G t) Φ) nf stk (push_matches ps (children G t) ρ k)) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk F ps t ρ s k HF Hfree Hl.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    destruct (Forall_push_inv _ _ _ _ _ _ Hl Hk) as [Hps Hk'].
    apply branch_sol_cons; [exact Hs | | | exact Hk'].
    - eapply sub_trans; [apply sub_extend; exact Hfree | exact Hf].
    - simpl. apply P_FunVar; [|exact Hps].
      unfold fsub, gsub. rewrite HF. apply Hf, lookup_extend_eq.
  Qed.

  (** ST-MATCH-FUN-VAR-BOUND *)
  Lemma success_step_funvar_bound : forall Θ' Φ' Θ Φ nf stk F ps t ρ k,
    fsub Φ ρ F = Some (label G t) -> length ps = length (children G t) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (push_matches ps (children G t) ρ k)) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk F ps t ρ k HF Hl.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    destruct (Forall_push_inv _ _ _ _ _ _ Hl Hk) as [Hps Hk'].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk'].
    simpl. apply P_FunVar; [exact (sub_gsub _ _ _ Hf F _ HF) | exact Hps].
  Qed.

  (** ST-MATCH-MU: the body's scope [call_env] reads the caller's slots. *)
  Lemma success_step_mu : forall Θ' Φ' Θ Φ nf stk P xs Fs d t ρ k,
    nth_error D P = Some d -> length xs = nparams d -> length Fs = nfparams d ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (body d) t (call_env ρ xs Fs) :: k)) ->
    ssol Θ' Φ' (Running Θ Φ nf stk (AMatch (PCall P xs Fs) t ρ :: k)).
  Proof.
    intros Θ' Φ' Θ Φ nf stk P xs Fs d t ρ k HP Hxs HFs.
    apply ssol_same_stack. intros [Hs [Hf Hk]].
    apply Forall_cons_iff in Hk as [Hm Hk'].
    apply branch_sol_cons; [exact Hs | exact Hf | | exact Hk'].
    simpl. eapply P_Mu; [exact HP | exact Hxs | exact HFs |].
    eapply matches_ext; [| | exact Hm]; intros y;
      unfold tsub, fsub, call_env; simpl; rewrite gsub_call_map; reflexivity.
  Qed.

  (** One line per rule of [step]. *)
  Lemma ssol_step_back : forall Θ' Φ' st st',
    step G D st st' -> ssol Θ' Φ' st' -> ssol Θ' Φ' st.
  Proof.
    intros Θ' Φ' st st' Hst. destruct Hst.
    - (* ST-SUCCESS *)                apply success_step_success.
    - (* ST-MATCH-VAR-BIND *)         apply success_step_var_bind; assumption.
    - (* ST-MATCH-VAR-BOUND *)        apply success_step_var_bound; assumption.
    - (* ST-MATCH-VAR-CONFLICT *)     apply success_step_backtrack.
    - (* ST-MATCH-FUN *)              apply success_step_fun; assumption.
    - (* ST-MATCH-FUN-CONFLICT *)     apply success_step_backtrack.
    - (* ST-MATCH-ALT *)              apply success_step_alt.
    - (* ST-MATCH-GUARD *)            apply success_step_guard.
    - (* ST-CHECKGUARD-CONTINUE *)    apply success_step_checkguard_continue; assumption.
    - (* ST-CHECKGUARD-BACKTRACK *)   apply success_step_backtrack.
    - (* ST-MATCH-EXISTS *)           apply success_step_exists.
    - (* ST-MATCH-EXISTS for ∃F *)    apply success_step_existsf.
    - (* ST-CHECKNAME *)              apply success_step_checkname; assumption.
    - (* ST-CHECKNAME, backtrack *)   apply success_step_backtrack.
    - (* ST-CHECKFNAME *)             apply success_step_checkfname; assumption.
    - (* ST-CHECKFNAME, backtrack *)  apply success_step_backtrack.
    - (* ST-MATCH-MATCHCONSTR *)      apply success_step_match_matchconstr.
    - (* ST-MATCHCONSTR *)            apply success_step_matchconstr; assumption.
    - (* ST-MATCHCONSTR, backtrack *) apply success_step_backtrack.
    - (* ST-MATCH-FUN-VAR-BIND *)     apply success_step_funvar_bind; assumption.
    - (* ST-MATCH-FUN-VAR-BOUND *)    apply success_step_funvar_bound; assumption.
    - (* ST-MATCH-FUN-VAR-CONFLICT *) apply success_step_backtrack.
    - (* ST-MATCH-MU *)               apply success_step_mu; assumption.
    - (* ST-MATCH-MU, bad call *)     apply success_step_backtrack.
  Qed.

  Lemma ssol_star_back : forall Θ' Φ' st st',
    star G D st st' -> ssol Θ' Φ' st' -> ssol Θ' Φ' st.
  Proof.
    intros Θ' Φ' st st' Hstar.
    induction Hstar as [st|st st1 st2 Hst _ IH]; intros Hsol; [exact Hsol|].
    exact (ssol_step_back _ _ _ _ Hst (IH Hsol)).
  Qed.

  (** The root's scope: variable [i] is slot [i]. *)
  Definition root_env (n m : nat) : env := mkEnv (ident_map n) (ident_map m).

  (** Theorem 2, first half. *)
  Theorem success_soundness : forall n m p t Θ Φ,
    star G D (init n m p t) (Success Θ Φ) ->
    matches G D (tsub Θ (root_env n m)) (fsub Φ (root_env n m)) p t.
  Proof.
    intros n m p t Θ Φ H.
    assert (Hs : ssol Θ Φ (init n m p t)).
    { eapply ssol_star_back; [exact H | split; reflexivity]. }
    destruct Hs as [[_ [_ Hk]]|Hstk].
    - apply Forall_cons_iff in Hk as [Hm _]. exact Hm.
    - inversion Hstk.
  Qed.

  (** ** Failure soundness *)

  (** Slots that the variables [l] stand for in scope [m]. *)
  Definition img (m : vmap) (l : list nat) (s : nat) : Prop :=
    exists x, In x l /\ vfind x m = Some s.

  Definition union (B B' : nat -> Prop) (s : nat) : Prop := B s \/ B' s.

  (** Well-formed continuations: guards, [checkName] and [matchConstr] only
      read slots bound by the time they run; [B]/[BF] are the slots bound so
      far (term/operator). *)
  Fixpoint wfk (B BF : nat -> Prop) (k : cont) : Prop :=
    match k with
    | [] => True
    | AMatch p _ ρ :: k' =>
        wfb D p = true /\
        wfk (union B (img (tenv ρ) (binds D p))) (union BF (img (fenv ρ) (fbinds D p))) k'
    | AGuard g ρ :: k' =>
        (forall x s, In x (guard_vars g) -> vfind x (tenv ρ) = Some s -> B s) /\
        (forall F s, In F (guard_fvars g) -> vfind F (fenv ρ) = Some s -> BF s) /\
        wfk B BF k'
    | ACheckName s :: k' => B s /\ wfk B BF k'
    | ACheckFName s :: k' => BF s /\ wfk B BF k'
    | AMatchConstr p x ρ :: k' =>
        (forall s, vfind x (tenv ρ) = Some s -> B s) /\ wfb D p = true /\
        wfk (union B (img (tenv ρ) (binds D p))) (union BF (img (fenv ρ) (fbinds D p))) k'
    end.

  Lemma wfk_mono : forall k (B B' BF BF' : nat -> Prop),
    (forall s, B s -> B' s) -> (forall s, BF s -> BF' s) -> wfk B BF k -> wfk B' BF' k.
  Proof.
    induction k as [|a k IH]; intros B B' BF BF' HB HBF H; simpl in *; auto.
    destruct a as [p t ρ|g ρ|s|s|p x ρ]; simpl in *.
    - destruct H as [H1 H2]. split; auto. eapply IH; [| |exact H2];
        intros s [Hs|Hs]; unfold union; auto.
    - destruct H as [H1 [H2 H3]]. repeat split; eauto.
    - destruct H as [H1 H2]. split; eauto.
    - destruct H as [H1 H2]. split; eauto.
    - destruct H as [H1 [H2 H3]]. repeat split; eauto. eapply IH; [| |exact H3];
        intros s [Hs|Hs]; unfold union; auto.
  Qed.

  Lemma img_app : forall m l1 l2 s, img m (l1 ++ l2) s -> img m l1 s \/ img m l2 s.
  Proof.
    intros m l1 l2 s [x [Hx Hs]]. apply in_app_or in Hx.
    destruct Hx; [left|right]; exists x; auto.
  Qed.

  Lemma wfk_push : forall ps ts ρ k B BF,
    length ps = length ts -> forallb (wfb D) ps = true ->
    wfk (union B (img (tenv ρ) (flat_map (binds D) ps)))
        (union BF (img (fenv ρ) (flat_map (fbinds D) ps))) k ->
    wfk B BF (push_matches ps ts ρ k).
  Proof.
    induction ps as [|p ps IH]; intros ts ρ k B BF Hl Hw H; destruct ts as [|t ts];
      simpl in *; try discriminate.
    - eapply wfk_mono; [| |exact H]; intros s [Hs|[x [[] _]]]; auto.
    - apply andb_true_iff in Hw. destruct Hw as [Hp Hps]. split; auto.
      apply IH; auto. eapply wfk_mono; [| |exact H].
      + intros s [Hs|Hs]; [left; left; exact Hs|].
        apply img_app in Hs. unfold union. tauto.
      + intros s [Hs|Hs]; [left; left; exact Hs|].
        apply img_app in Hs. unfold union. tauto.
  Qed.

  Definition bound_in (Θ : subst) (s : nat) : Prop := lookup s Θ <> None.

  Definition action_below (nf : nat) (a : action) : Prop :=
    match a with
    | AMatch _ _ ρ | AGuard _ ρ | AMatchConstr _ _ ρ => env_below nf ρ
    | ACheckName s | ACheckFName s => s < nf
    end.

  Definition branch_inv (nf : nat) (Θ Φ : subst) (k : cont) : Prop :=
    dom_below nf Θ /\ dom_below nf Φ /\ Forall (action_below nf) k /\
    wfk (bound_in Θ) (bound_in Φ) k.

  Definition inv (st : state) : Prop :=
    match st with
    | Running Θ Φ nf stk k =>
        branch_inv nf Θ Φ k /\
        Forall (fun fr => branch_inv nf (fst (fst fr)) (snd (fst fr)) (snd fr)) stk
    | _ => True
    end.

  Lemma below_mono : forall nf nf' a, nf <= nf' -> action_below nf a -> action_below nf' a.
  Proof.
    intros nf nf' a Hle H. destruct a; simpl in *; try lia;
      destruct H as [H1 H2]; split; intros y sl Hy;
      first [apply H1 in Hy | apply H2 in Hy]; lia.
  Qed.

  Lemma branch_inv_mono : forall nf nf' Θ Φ k,
    nf <= nf' -> branch_inv nf Θ Φ k -> branch_inv nf' Θ Φ k.
  Proof.
    intros nf nf' Θ Φ k Hle [H1 [H2 [H3 H4]]]. repeat split; auto.
    - intros g v Hg. apply H1 in Hg. lia.
    - intros g v Hg. apply H2 in Hg. lia.
    - eapply Forall_impl; [|exact H3]. intros a. apply below_mono. exact Hle.
  Qed.

  Lemma inv_backtrack : forall nf stk,
    Forall (fun fr => branch_inv nf (fst (fst fr)) (snd (fst fr)) (snd fr)) stk ->
    inv (backtrack nf stk).
  Proof.
    intros nf stk H. destruct stk as [|[[Θ Φ] k] stk]; simpl; [exact I|].
    apply Forall_cons_iff in H as [Hfr Hstk]. split; [exact Hfr | exact Hstk].
  Qed.

  Lemma Forall_below_push : forall nf ps ts ρ k,
    env_below nf ρ -> Forall (action_below nf) k ->
    Forall (action_below nf) (push_matches ps ts ρ k).
  Proof.
    induction ps as [|p ps IH]; intros ts ρ k Hρ Hk; destruct ts; simpl; auto.
  Qed.

  Lemma dom_below_extend : forall nf s v Θ,
    s < nf -> dom_below nf Θ -> dom_below nf (extend s v Θ).
  Proof.
    unfold dom_below. intros nf s v Θ Hs H g w Hg.
    destruct (Nat.eq_dec s g) as [<-|Hne]; auto.
    rewrite lookup_extend_neq in Hg by exact Hne. eauto.
  Qed.

  Lemma bound_in_extend : forall s v Θ g, bound_in Θ g -> bound_in (extend s v Θ) g.
  Proof.
    unfold bound_in. intros s v Θ g H. destruct (Nat.eq_dec s g) as [<-|Hne].
    - rewrite lookup_extend_eq. discriminate.
    - rewrite lookup_extend_neq by exact Hne. exact H.
  Qed.

  Lemma img_nil : forall m s, img m [] s -> False.
  Proof. intros m s [x [[] _]]. Qed.

  Lemma img_single : forall m x s, img m [x] s -> vfind x m = Some s.
  Proof. intros m x s [y [[<-|[]] H]]. exact H. Qed.

  Lemma wf_defs_body : wf_defs D = true -> forall P d, nth_error D P = Some d ->
    wfb D (body d) = true /\
    (forall i, In i (pbinds d) -> In i (binds D (body d))) /\
    (forall i, In i (pfbinds d) -> In i (fbinds D (body d))).
  Proof.
    intros Hd P d HP. unfold wf_defs in Hd. rewrite forallb_forall in Hd.
    assert (Hw : wf_def D d = true) by (apply Hd; eapply nth_error_In; eauto).
    unfold wf_def in Hw. apply andb_true_iff in Hw. destruct Hw as [Hw _].
    apply andb_true_iff in Hw. destruct Hw as [Hw Hf].
    apply andb_true_iff in Hw. destruct Hw as [Hw Hb].
    repeat split; auto; apply subset_In; auto.
  Qed.

  Lemma img_call : forall m xs l l' s,
    (forall i, In i l -> In i l') ->
    img m (args_of l xs) s -> img (call_map m xs 0) l' s.
  Proof.
    intros m xs l l' s Hl [y [Hy Hs]]. apply In_args_of in Hy.
    destruct Hy as [i [Hi Hn]]. exists i. split; auto.
    rewrite vfind_call_map. simpl. rewrite Nat.sub_0_r, Hn. exact Hs.
  Qed.

  Lemma env_below_call : forall nf ρ xs Fs, env_below nf ρ -> env_below nf (call_env ρ xs Fs).
  Proof.
    intros nf ρ xs Fs [H1 H2]. split; intros x s Hx; simpl in Hx;
      apply vfind_call_map_in in Hx; destruct Hx as [y Hy]; eauto.
  Qed.

  (** *** The invariant, one lemma per rule *)

  (** Most rules keep the stack and [nf]: only the current branch changes. *)
  Lemma inv_same_stack : forall nf stk Θ1 Φ1 k1 Θ2 Φ2 k2,
    (branch_inv nf Θ1 Φ1 k1 -> branch_inv nf Θ2 Φ2 k2) ->
    inv (Running Θ1 Φ1 nf stk k1) -> inv (Running Θ2 Φ2 nf stk k2).
  Proof.
    intros nf stk Θ1 Φ1 k1 Θ2 Φ2 k2 Hfwd [Hbr Hstk]. exact (conj (Hfwd Hbr) Hstk).
  Qed.

  (** Every rule whose result is [backtrack nf stk]. *)
  Lemma inv_step_backtrack : forall Θ Φ nf stk k,
    inv (Running Θ Φ nf stk k) -> inv (backtrack nf stk).
  Proof. intros Θ Φ nf stk k [_ Hstk]. exact (inv_backtrack nf stk Hstk). Qed.

  (** ST-SUCCESS *)
  Lemma inv_step_success : forall Θ Φ nf stk,
    inv (Running Θ Φ nf stk []) -> inv (Success Θ Φ).
  Proof. intros Θ Φ nf stk _. exact I. Qed.

  (** ST-MATCH-VAR-BIND: the slot bound is below [nf], and [x] is bound
      from now on. *)
  Lemma inv_step_var_bind : forall Θ Φ nf stk x t ρ s k,
    vfind x (tenv ρ) = Some s ->
    inv (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)) ->
    inv (Running (extend s t Θ) Φ nf stk k).
  Proof.
    intros Θ Φ nf stk x t ρ s k Hx. apply inv_same_stack.
    intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [[Ha _] Hk1']. simpl in Hk2. destruct Hk2 as [_ Hk2].
    refine (conj _ (conj Hb2 (conj Hk1' _))).
    - apply dom_below_extend; [eapply Ha; exact Hx | exact Hb1].
    - eapply wfk_mono; [| | exact Hk2].
      + intros s' [Hs'|Hs']; [apply bound_in_extend; exact Hs'|].
        apply img_single in Hs'. rewrite Hx in Hs'. injection Hs' as Hss. subst s'.
        unfold bound_in. rewrite lookup_extend_eq. discriminate.
      + intros s' [Hs'|Hs']; [exact Hs'|]. destruct (img_nil _ _ Hs').
  Qed.

  (** ST-MATCH-VAR-BOUND *)
  Lemma inv_step_var_bound : forall Θ Φ nf stk x t ρ k,
    tsub Θ ρ x = Some t ->
    inv (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)) ->
    inv (Running Θ Φ nf stk k).
  Proof.
    intros Θ Φ nf stk x t ρ k Hx. apply tsub_var in Hx. destruct Hx as [s [Hxs Hs]].
    apply inv_same_stack. intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [_ Hk1']. simpl in Hk2. destruct Hk2 as [_ Hk2].
    refine (conj Hb1 (conj Hb2 (conj Hk1' _))).
    eapply wfk_mono; [| | exact Hk2].
    - intros s' [Hs'|Hs']; [exact Hs'|].
      apply img_single in Hs'. rewrite Hxs in Hs'. injection Hs' as Hss. subst s'.
      unfold bound_in. congruence.
    - intros s' [Hs'|Hs']; [exact Hs'|]. destruct (img_nil _ _ Hs').
  Qed.

  (** ST-MATCH-FUN *)
  Lemma inv_step_fun : forall Θ Φ nf stk f ps t ρ k,
    length ps = length (children G t) ->
    inv (Running Θ Φ nf stk (AMatch (PApp f ps) t ρ :: k)) ->
    inv (Running Θ Φ nf stk (push_matches ps (children G t) ρ k)).
  Proof.
    intros Θ Φ nf stk f ps t ρ k Hl. apply inv_same_stack.
    intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [Ha Hk1']. simpl in Hk2. destruct Hk2 as [Hw Hk2].
    refine (conj Hb1 (conj Hb2 (conj _ _))).
    - apply Forall_below_push; [exact Ha | exact Hk1'].
    - apply wfk_push; [exact Hl | exact Hw | exact Hk2].
  Qed.

  (** ST-MATCH-ALT: both branches bind at least [binds (p1 ‖ p2)]. *)
  Lemma inv_step_alt : forall Θ Φ nf stk p1 p2 t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PAlt p1 p2) t ρ :: k)) ->
    inv (Running Θ Φ nf ((Θ, Φ, AMatch p2 t ρ :: k) :: stk) (AMatch p1 t ρ :: k)).
  Proof.
    intros Θ Φ nf stk p1 p2 t ρ k [[Hb1 [Hb2 [Hk1 Hk2]]] Hstk].
    apply Forall_cons_iff in Hk1 as [Ha Hk1']. simpl in Hk2. destruct Hk2 as [Hw Hk2].
    apply andb_true_iff in Hw. destruct Hw as [Hw1 Hw2].
    assert (Hbranch : forall p, wfb D p = true ->
              (forall x, In x (inter (binds D p1) (binds D p2)) -> In x (binds D p)) ->
              (forall x, In x (inter (fbinds D p1) (fbinds D p2)) -> In x (fbinds D p)) ->
              branch_inv nf Θ Φ (AMatch p t ρ :: k)).
    { intros p Hwp Hp Hpf. refine (conj Hb1 (conj Hb2 (conj _ _))).
      - constructor; [exact Ha | exact Hk1'].
      - simpl. split; [exact Hwp|].
        eapply wfk_mono; [| | exact Hk2]; intros s' [Hs'|[y [Hy Hs']]];
          (left; exact Hs') || (right; exists y; split; auto). }
    split; [|constructor; [simpl | exact Hstk]].
    - apply Hbranch; [exact Hw1 | |]; intros y Hy; apply In_inter in Hy; tauto.
    - apply Hbranch; [exact Hw2 | |]; intros y Hy; apply In_inter in Hy; tauto.
  Qed.

  (** ST-MATCH-GUARD: a guard reads only what its pattern binds ([wfb]). *)
  Lemma inv_step_guard : forall Θ Φ nf stk p g t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PGuard p g) t ρ :: k)) ->
    inv (Running Θ Φ nf stk (AMatch p t ρ :: AGuard g ρ :: k)).
  Proof.
    intros Θ Φ nf stk p g t ρ k. apply inv_same_stack.
    intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [Ha Hk1']. simpl in Hk2. destruct Hk2 as [Hw Hk2].
    apply andb_true_iff in Hw. destruct Hw as [Hw Hwf].
    apply andb_true_iff in Hw. destruct Hw as [Hwp Hwt].
    refine (conj Hb1 (conj Hb2 (conj _ _))).
    - constructor; [exact Ha | constructor; [exact Ha | exact Hk1']].
    - simpl. split; [exact Hwp | split; [| split; [| exact Hk2]]].
      + intros y s Hy Hs. right. exists y.
        split; [eapply subset_In; [exact Hwt | exact Hy] | exact Hs].
      + intros y s Hy Hs. right. exists y.
        split; [eapply subset_In; [exact Hwf | exact Hy] | exact Hs].
  Qed.

  (** ST-CHECKGUARD-CONTINUE *)
  Lemma inv_step_checkguard_continue : forall Θ Φ nf stk g ρ k,
    inv (Running Θ Φ nf stk (AGuard g ρ :: k)) -> inv (Running Θ Φ nf stk k).
  Proof.
    intros Θ Φ nf stk g ρ k. apply inv_same_stack.
    intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [_ Hk1']. simpl in Hk2. destruct Hk2 as [_ [_ Hk2]].
    exact (conj Hb1 (conj Hb2 (conj Hk1' Hk2))).
  Qed.

  (** ST-MATCH-EXISTS: [nf] grows, so everything stays below it; the
      [checkName(nf)] reads a slot that [p] binds ([wfb]). *)
  Lemma inv_step_exists : forall Θ Φ nf stk x p t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PExists x p) t ρ :: k)) ->
    inv (Running Θ Φ (S nf) stk (AMatch p t (env_add_t ρ x nf) :: ACheckName nf :: k)).
  Proof.
    intros Θ Φ nf stk x p t ρ k [[Hb1 [Hb2 [Hk1 Hk2]]] Hstk].
    apply Forall_cons_iff in Hk1 as [[Ha1 Ha2] Hk1']. simpl in Hk2. destruct Hk2 as [Hw Hk2].
    apply andb_true_iff in Hw. destruct Hw as [Hw Hx]. apply memb_In in Hx.
    refine (conj (conj _ (conj _ (conj _ _))) _).
    - intros g v Hg. apply Hb1 in Hg. lia.
    - intros g v Hg. apply Hb2 in Hg. lia.
    - constructor; [|constructor; [simpl; lia|]].
      + split; simpl; intros y s Hy.
        * rewrite vfind_add in Hy. destruct (Nat.eqb x y).
          -- injection Hy as Hy. lia.
          -- apply Ha1 in Hy. lia.
        * apply Ha2 in Hy. lia.
      + eapply Forall_impl; [|exact Hk1']. intros a. apply below_mono. lia.
    - simpl. split; [exact Hw | split].
      + right. exists x. split; [exact Hx|]. simpl. rewrite vfind_add, Nat.eqb_refl. reflexivity.
      + eapply wfk_mono; [| | exact Hk2].
        * intros s' [Hs'|[y [Hy Hs']]]; [left; exact Hs'|].
          apply In_remove_var in Hy. destruct Hy as [Hy Hne].
          right. exists y. split; [exact Hy|]. simpl. rewrite vfind_add.
          apply Nat.eqb_neq in Hne. rewrite Hne. exact Hs'.
        * intros s' Hs'. exact Hs'.
    - eapply Forall_impl; [|exact Hstk]. intros fr. apply branch_inv_mono. lia.
  Qed.

  (** ST-MATCH-EXISTS for [∃F]. *)
  Lemma inv_step_existsf : forall Θ Φ nf stk F p t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PExistsF F p) t ρ :: k)) ->
    inv (Running Θ Φ (S nf) stk (AMatch p t (env_add_f ρ F nf) :: ACheckFName nf :: k)).
  Proof.
    intros Θ Φ nf stk F p t ρ k [[Hb1 [Hb2 [Hk1 Hk2]]] Hstk].
    apply Forall_cons_iff in Hk1 as [[Ha1 Ha2] Hk1']. simpl in Hk2. destruct Hk2 as [Hw Hk2].
    apply andb_true_iff in Hw. destruct Hw as [Hw Hx]. apply memb_In in Hx.
    refine (conj (conj _ (conj _ (conj _ _))) _).
    - intros g v Hg. apply Hb1 in Hg. lia.
    - intros g v Hg. apply Hb2 in Hg. lia.
    - constructor; [|constructor; [simpl; lia|]].
      + split; simpl; intros y s Hy.
        * apply Ha1 in Hy. lia.
        * rewrite vfind_add in Hy. destruct (Nat.eqb F y).
          -- injection Hy as Hy. lia.
          -- apply Ha2 in Hy. lia.
      + eapply Forall_impl; [|exact Hk1']. intros a. apply below_mono. lia.
    - simpl. split; [exact Hw | split].
      + right. exists F. split; [exact Hx|]. simpl. rewrite vfind_add, Nat.eqb_refl. reflexivity.
      + eapply wfk_mono; [| | exact Hk2].
        * intros s' Hs'. exact Hs'.
        * intros s' [Hs'|[y [Hy Hs']]]; [left; exact Hs'|].
          apply In_remove_var in Hy. destruct Hy as [Hy Hne].
          right. exists y. split; [exact Hy|]. simpl. rewrite vfind_add.
          apply Nat.eqb_neq in Hne. rewrite Hne. exact Hs'.
    - eapply Forall_impl; [|exact Hstk]. intros fr. apply branch_inv_mono. lia.
  Qed.

  (** ST-CHECKNAME *)
  Lemma inv_step_checkname : forall Θ Φ nf stk s k,
    inv (Running Θ Φ nf stk (ACheckName s :: k)) -> inv (Running Θ Φ nf stk k).
  Proof.
    intros Θ Φ nf stk s k. apply inv_same_stack.
    intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [_ Hk1']. simpl in Hk2. destruct Hk2 as [_ Hk2].
    exact (conj Hb1 (conj Hb2 (conj Hk1' Hk2))).
  Qed.

  (** ST-CHECKNAME for operator variables. *)
  Lemma inv_step_checkfname : forall Θ Φ nf stk s k,
    inv (Running Θ Φ nf stk (ACheckFName s :: k)) -> inv (Running Θ Φ nf stk k).
  Proof.
    intros Θ Φ nf stk s k. apply inv_same_stack.
    intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [_ Hk1']. simpl in Hk2. destruct Hk2 as [_ Hk2].
    exact (conj Hb1 (conj Hb2 (conj Hk1' Hk2))).
  Qed.

  (** ST-MATCH-MATCHCONSTR: [x] is bound by [p] ([wfb]). *)
  Lemma inv_step_match_matchconstr : forall Θ Φ nf stk p p' x t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PConstr p p' x) t ρ :: k)) ->
    inv (Running Θ Φ nf stk (AMatch p t ρ :: AMatchConstr p' x ρ :: k)).
  Proof.
    intros Θ Φ nf stk p p' x t ρ k. apply inv_same_stack.
    intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [Ha Hk1']. simpl in Hk2. destruct Hk2 as [Hw Hk2].
    apply andb_true_iff in Hw. destruct Hw as [Hw Hx].
    apply andb_true_iff in Hw. destruct Hw as [Hwp Hwp']. apply memb_In in Hx.
    refine (conj Hb1 (conj Hb2 (conj _ _))).
    - constructor; [exact Ha | constructor; [exact Ha | exact Hk1']].
    - simpl. split; [exact Hwp | split; [| split; [exact Hwp' |]]].
      + intros s Hs. right. exists x. split; [exact Hx | exact Hs].
      + eapply wfk_mono; [| | exact Hk2];
          intros s' [Hs'|Hs']; try (left; left; exact Hs');
          apply img_app in Hs'; unfold union; tauto.
  Qed.

  (** ST-MATCHCONSTR *)
  Lemma inv_step_matchconstr : forall Θ Φ nf stk p x ρ t k,
    inv (Running Θ Φ nf stk (AMatchConstr p x ρ :: k)) ->
    inv (Running Θ Φ nf stk (AMatch p t ρ :: k)).
  Proof.
    intros Θ Φ nf stk p x ρ t k. apply inv_same_stack.
    intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [Ha Hk1']. simpl in Hk2. destruct Hk2 as [_ [Hw Hk2]].
    refine (conj Hb1 (conj Hb2 (conj _ _))).
    - constructor; [exact Ha | exact Hk1'].
    - simpl. split; [exact Hw | exact Hk2].
  Qed.

  (** ST-MATCH-FUN-VAR-BIND *)
  Lemma inv_step_funvar_bind : forall Θ Φ nf stk F ps t ρ s k,
    vfind F (fenv ρ) = Some s -> length ps = length (children G t) ->
    inv (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)) ->
    inv (Running Θ (extend s (label G t) Φ) nf stk (push_matches ps (children G t) ρ k)).
  Proof.
    intros Θ Φ nf stk F ps t ρ s k HF Hl. apply inv_same_stack.
    intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [Ha Hk1']. simpl in Hk2. destruct Hk2 as [Hw Hk2].
    refine (conj Hb1 (conj _ (conj _ _))).
    - apply dom_below_extend; [|exact Hb2]. destruct Ha as [_ Ha2]. eapply Ha2. exact HF.
    - apply Forall_below_push; [exact Ha | exact Hk1'].
    - apply wfk_push; [exact Hl | exact Hw |]. eapply wfk_mono; [| | exact Hk2].
      + intros s' Hs'. exact Hs'.
      + intros s' [Hs'|[y [[<-|Hy] Hs']]].
        * left. apply bound_in_extend. exact Hs'.
        * left. rewrite HF in Hs'. injection Hs' as Hss. subst s'.
          unfold bound_in. rewrite lookup_extend_eq. discriminate.
        * right. exists y. split; [exact Hy | exact Hs'].
  Qed.

  (** ST-MATCH-FUN-VAR-BOUND *)
  Lemma inv_step_funvar_bound : forall Θ Φ nf stk F ps t ρ k,
    fsub Φ ρ F = Some (label G t) -> length ps = length (children G t) ->
    inv (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)) ->
    inv (Running Θ Φ nf stk (push_matches ps (children G t) ρ k)).
  Proof.
    intros Θ Φ nf stk F ps t ρ k HFt Hl. apply fsub_var in HFt. destruct HFt as [s [HF Hs]].
    apply inv_same_stack. intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [Ha Hk1']. simpl in Hk2. destruct Hk2 as [Hw Hk2].
    refine (conj Hb1 (conj Hb2 (conj _ _))).
    - apply Forall_below_push; [exact Ha | exact Hk1'].
    - apply wfk_push; [exact Hl | exact Hw |]. eapply wfk_mono; [| | exact Hk2].
      + intros s' Hs'. exact Hs'.
      + intros s' [Hs'|[y [[<-|Hy] Hs']]].
        * left. exact Hs'.
        * left. rewrite HF in Hs'. injection Hs' as Hss. subst s'.
          unfold bound_in. congruence.
        * right. exists y. split; [exact Hy | exact Hs'].
  Qed.

  (** ST-MATCH-MU: the body binds the parameters it claims ([wf_defs]). *)
  Lemma inv_step_mu : wf_defs D = true -> forall Θ Φ nf stk P xs Fs d t ρ k,
    nth_error D P = Some d ->
    inv (Running Θ Φ nf stk (AMatch (PCall P xs Fs) t ρ :: k)) ->
    inv (Running Θ Φ nf stk (AMatch (body d) t (call_env ρ xs Fs) :: k)).
  Proof.
    intros Hd Θ Φ nf stk P xs Fs d t ρ k HP. apply inv_same_stack.
    intros [Hb1 [Hb2 [Hk1 Hk2]]].
    apply Forall_cons_iff in Hk1 as [Ha Hk1']. simpl in Hk2. destruct Hk2 as [_ Hk2].
    rewrite HP in Hk2.
    destruct (wf_defs_body Hd P d HP) as [Hwb [Hpb Hpfb]].
    refine (conj Hb1 (conj Hb2 (conj _ _))).
    - constructor; [apply env_below_call; exact Ha | exact Hk1'].
    - simpl. split; [exact Hwb|].
      eapply wfk_mono; [| | exact Hk2];
        intros s' [Hs'|Hs']; try (left; exact Hs'); right;
        eapply img_call; eauto.
  Qed.

  (** One line per rule of [step]. *)
  Lemma inv_step : wf_defs D = true ->
    forall st st', step G D st st' -> inv st -> inv st'.
  Proof.
    intros Hd st st' Hst. destruct Hst.
    - (* ST-SUCCESS *)                apply inv_step_success.
    - (* ST-MATCH-VAR-BIND *)         apply inv_step_var_bind; assumption.
    - (* ST-MATCH-VAR-BOUND *)        apply inv_step_var_bound; assumption.
    - (* ST-MATCH-VAR-CONFLICT *)     apply inv_step_backtrack.
    - (* ST-MATCH-FUN *)              apply inv_step_fun; assumption.
    - (* ST-MATCH-FUN-CONFLICT *)     apply inv_step_backtrack.
    - (* ST-MATCH-ALT *)              apply inv_step_alt.
    - (* ST-MATCH-GUARD *)            apply inv_step_guard.
    - (* ST-CHECKGUARD-CONTINUE *)    apply inv_step_checkguard_continue.
    - (* ST-CHECKGUARD-BACKTRACK *)   apply inv_step_backtrack.
    - (* ST-MATCH-EXISTS *)           apply inv_step_exists.
    - (* ST-MATCH-EXISTS for ∃F *)    apply inv_step_existsf.
    - (* ST-CHECKNAME *)              apply inv_step_checkname.
    - (* ST-CHECKNAME, backtrack *)   apply inv_step_backtrack.
    - (* ST-CHECKFNAME *)             apply inv_step_checkfname.
    - (* ST-CHECKFNAME, backtrack *)  apply inv_step_backtrack.
    - (* ST-MATCH-MATCHCONSTR *)      apply inv_step_match_matchconstr.
    - (* ST-MATCHCONSTR *)            apply inv_step_matchconstr.
    - (* ST-MATCHCONSTR, backtrack *) apply inv_step_backtrack.
    - (* ST-MATCH-FUN-VAR-BIND *)     apply inv_step_funvar_bind; assumption.
    - (* ST-MATCH-FUN-VAR-BOUND *)    apply inv_step_funvar_bound; assumption.
    - (* ST-MATCH-FUN-VAR-CONFLICT *) apply inv_step_backtrack.
    - (* ST-MATCH-MU *)               apply inv_step_mu; assumption.
    - (* ST-MATCH-MU, bad call *)     apply inv_step_backtrack.
  Qed.

  Lemma eval_expr_agree : forall σ σ' ψ ψ' e,
    (forall x, In x (expr_vars e) -> σ x = σ' x) ->
    (forall F, In F (expr_fvars e) -> ψ F = ψ' F) ->
    eval_expr G σ ψ e = eval_expr G σ' ψ' e.
  Proof.
    intros σ σ' ψ ψ' e.
    induction e as [z|x a|F a|e1 IH1 e2 IH2|e1 IH1 e2 IH2|e1 IH1 e2 IH2];
      intros Hs Hf; simpl in *.
    - reflexivity.
    - rewrite Hs; [reflexivity | left; reflexivity].
    - rewrite Hf; [reflexivity | left; reflexivity].
    - rewrite IH1, IH2; auto; intros y Hy; first [apply Hs | apply Hf];
        apply in_or_app; auto.
    - rewrite IH1, IH2; auto; intros y Hy; first [apply Hs | apply Hf];
        apply in_or_app; auto.
    - rewrite IH1, IH2; auto; intros y Hy; first [apply Hs | apply Hf];
        apply in_or_app; auto.
  Qed.

  Lemma eval_guard_agree : forall σ σ' ψ ψ' g,
    (forall x, In x (guard_vars g) -> σ x = σ' x) ->
    (forall F, In F (guard_fvars g) -> ψ F = ψ' F) ->
    eval_guard G σ ψ g = eval_guard G σ' ψ' g.
  Proof.
    intros σ σ' ψ ψ' g.
    induction g as [|e1 e2|e1 e2|g1 IH1 g2 IH2|g1 IH1 g2 IH2|g IH]; intros Hs Hf; simpl in *.
    - reflexivity.
    - rewrite !(eval_expr_agree σ σ' ψ ψ'); auto; intros y Hy;
        first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite !(eval_expr_agree σ σ' ψ ψ'); auto; intros y Hy;
        first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IH1, IH2; auto; intros y Hy;
        first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IH1, IH2; auto; intros y Hy;
        first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IH; auto.
  Qed.

  (** An action below [nf] cannot tell apart substitutions that agree
      below [nf]. *)
  Lemma holds_agree : forall nf Θ1 Φ1 Θ2 Φ2 a,
    (forall g, g < nf -> lookup g Θ1 = lookup g Θ2) ->
    (forall g, g < nf -> lookup g Φ1 = lookup g Φ2) ->
    action_below nf a -> holds Θ1 Φ1 a -> holds Θ2 Φ2 a.
  Proof.
    intros nf Θ1 Φ1 Θ2 Φ2 a HΘ HΦ Hb H.
    destruct a as [p t ρ|g ρ|sl|sl|p x ρ]; simpl in *.
    - destruct Hb as [Hb1 Hb2]. eapply matches_ext; [| |exact H]; intros y;
        unfold tsub, fsub; eapply gsub_agree; eauto.
    - destruct Hb as [Hb1 Hb2]. rewrite <- H. symmetry. apply eval_guard_agree;
        intros y _; unfold tsub, fsub; eapply gsub_agree; eauto.
    - rewrite <- HΘ; auto.
    - rewrite <- HΦ; auto.
    - destruct Hb as [Hb1 Hb2]. destruct H as [t [Hx Hm]]. exists t.
      assert (Ht : forall y, tsub Θ1 ρ y = tsub Θ2 ρ y)
        by (intros y; unfold tsub; eapply gsub_agree; eauto).
      assert (Hf : forall y, fsub Φ1 ρ y = fsub Φ2 ρ y)
        by (intros y; unfold fsub; eapply gsub_agree; eauto).
      split; [rewrite <- Ht; exact Hx|]. eapply matches_ext; eauto.
  Qed.

  Lemma Forall_holds_agree : forall nf Θ1 Φ1 Θ2 Φ2 k,
    (forall g, g < nf -> lookup g Θ1 = lookup g Θ2) ->
    (forall g, g < nf -> lookup g Φ1 = lookup g Φ2) ->
    Forall (action_below nf) k -> Forall (holds Θ1 Φ1) k -> Forall (holds Θ2 Φ2) k.
  Proof.
    intros nf Θ1 Φ1 Θ2 Φ2 k HΘ HΦ Hb H.
    induction H as [|a k Ha _ IH]; [constructor|].
    apply Forall_cons_iff in Hb as [Hba Hbk].
    constructor; [eapply holds_agree; [exact HΘ | exact HΦ | exact Hba | exact Ha] | exact (IH Hbk)].
  Qed.

  Definition can_complete (Θ Φ : subst) (k : cont) : Prop :=
    exists Θ' Φ', branch_sol Θ' Φ' Θ Φ k.

  Definition fsol (st : state) : Prop :=
    match st with
    | Running Θ Φ _ stk k =>
        can_complete Θ Φ k \/
        Exists (fun fr => can_complete (fst (fst fr)) (snd (fst fr)) (snd fr)) stk
    | Success _ _ => True
    | Failure => False
    end.

  Lemma fsol_backtrack : forall nf stk,
    Exists (fun fr => can_complete (fst (fst fr)) (snd (fst fr)) (snd fr)) stk ->
    fsol (backtrack nf stk).
  Proof.
    intros nf stk H. destruct stk as [|[[Θ Φ] k] stk]; simpl.
    - apply Exists_nil in H. destruct H.
    - apply Exists_cons in H as [Hfr|Hstk]; [left; exact Hfr | right; exact Hstk].
  Qed.

  Lemma lookup_add_other : forall nf v Θ g,
    g < nf -> lookup g (extend nf v Θ) = lookup g Θ.
  Proof. intros nf v Θ g Hg. apply lookup_extend_neq. lia. Qed.

  (** *** Failure, one lemma per rule *)

  (** The two shapes of a failure case: a step that keeps the stack (a
      completion of the current branch gives one of the next), and a step
      that backtracks (the current branch has no completion). *)
  Lemma fsol_same_stack : forall nf1 nf2 stk Θ1 Φ1 k1 Θ2 Φ2 k2,
    (can_complete Θ1 Φ1 k1 -> can_complete Θ2 Φ2 k2) ->
    fsol (Running Θ1 Φ1 nf1 stk k1) -> fsol (Running Θ2 Φ2 nf2 stk k2).
  Proof.
    intros nf1 nf2 stk Θ1 Φ1 k1 Θ2 Φ2 k2 Hfwd [Hsol|Hstk].
    - left. exact (Hfwd Hsol).
    - right. exact Hstk.
  Qed.

  Lemma fsol_dead_branch : forall Θ Φ nf stk k,
    ~ can_complete Θ Φ k -> fsol (Running Θ Φ nf stk k) -> fsol (backtrack nf stk).
  Proof.
    intros Θ Φ nf stk k Hno [Hsol|Hstk].
    - destruct (Hno Hsol).
    - exact (fsol_backtrack nf stk Hstk).
  Qed.

  (** A completion of [a :: k] completes [k]. *)
  Lemma can_complete_tail : forall Θ Φ a k, can_complete Θ Φ (a :: k) -> can_complete Θ Φ k.
  Proof.
    intros Θ Φ a k [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [_ Hk'].
    exists Θ', Φ'. exact (conj Hs (conj Hf Hk')).
  Qed.

  (** ST-SUCCESS *)
  Lemma fail_step_success : forall Θ Φ nf stk,
    inv (Running Θ Φ nf stk []) -> fsol (Running Θ Φ nf stk []) -> fsol (Success Θ Φ).
  Proof. intros Θ Φ nf stk _ _. exact I. Qed.

  (** ST-MATCH-VAR-BIND: the completion already maps [x]'s slot to [t]. *)
  Lemma fail_step_var_bind : forall Θ Φ nf stk x t ρ s k,
    vfind x (tenv ρ) = Some s ->
    inv (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)) ->
    fsol (Running (extend s t Θ) Φ nf stk k).
  Proof.
    intros Θ Φ nf stk x t ρ s k Hx _. apply fsol_same_stack.
    intros [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [Hm Hk'].
    simpl in Hm. apply matches_inv_var in Hm. unfold tsub, gsub in Hm. rewrite Hx in Hm.
    exists Θ', Φ'. refine (conj _ (conj Hf Hk')). apply extend_sub; [exact Hs | exact Hm].
  Qed.

  (** ST-MATCH-VAR-BOUND *)
  Lemma fail_step_var_bound : forall Θ Φ nf stk x t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk k).
  Proof.
    intros Θ Φ nf stk x t ρ k _. apply fsol_same_stack, can_complete_tail.
  Qed.

  (** ST-MATCH-VAR-CONFLICT: P-VAR would need [θ'(x) = t]. *)
  Lemma fail_step_var_conflict : forall Θ Φ nf stk x t ρ k,
    (vfind x (tenv ρ) = None \/ exists t', tsub Θ ρ x = Some t' /\ t' <> t) ->
    inv (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)) ->
    fsol (backtrack nf stk).
  Proof.
    intros Θ Φ nf stk x t ρ k Hc _. apply fsol_dead_branch.
    intros [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [Hm _].
    simpl in Hm. apply matches_inv_var in Hm. unfold tsub in Hm.
    destruct Hc as [Hnone|[t' [Ht' Hne]]].
    - unfold gsub in Hm. rewrite Hnone in Hm. discriminate.
    - apply (sub_gsub _ _ (tenv ρ) Hs) in Ht'. congruence.
  Qed.

  (** ST-MATCH-FUN *)
  Lemma fail_step_fun : forall Θ Φ nf stk f ps t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PApp f ps) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PApp f ps) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (push_matches ps (children G t) ρ k)).
  Proof.
    intros Θ Φ nf stk f ps t ρ k _. apply fsol_same_stack.
    intros [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [Hm Hk'].
    simpl in Hm. apply matches_inv_fun in Hm as [_ Hps].
    exists Θ', Φ'. refine (conj Hs (conj Hf _)). apply Forall_push; [exact Hps | exact Hk'].
  Qed.

  (** ST-MATCH-FUN-CONFLICT: P-FUN needs the label and the arity. *)
  Lemma fail_step_fun_conflict : forall Θ Φ nf stk f ps t ρ k,
    label G t <> f \/ length ps <> length (children G t) ->
    inv (Running Θ Φ nf stk (AMatch (PApp f ps) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PApp f ps) t ρ :: k)) ->
    fsol (backtrack nf stk).
  Proof.
    intros Θ Φ nf stk f ps t ρ k Hc _. apply fsol_dead_branch.
    intros [Θ' [Φ' [_ [_ Hk]]]]. apply Forall_cons_iff in Hk as [Hm _].
    simpl in Hm. apply matches_inv_fun in Hm as [Hlabel Hps].
    apply matches_list_length in Hps. destruct Hc as [Hc|Hc]; contradiction.
  Qed.

  (** ST-MATCH-ALT: P-ALT-1 completes the first branch, P-ALT-2 the frame. *)
  Lemma fail_step_alt : forall Θ Φ nf stk p1 p2 t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PAlt p1 p2) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PAlt p1 p2) t ρ :: k)) ->
    fsol (Running Θ Φ nf ((Θ, Φ, AMatch p2 t ρ :: k) :: stk) (AMatch p1 t ρ :: k)).
  Proof.
    intros Θ Φ nf stk p1 p2 t ρ k _ [[Θ' [Φ' [Hs [Hf Hk]]]]|Hstk].
    - apply Forall_cons_iff in Hk as [Hm Hk']. simpl in Hm.
      apply matches_inv_alt in Hm as [Hm1|Hm2].
      + left. exists Θ', Φ'. refine (conj Hs (conj Hf _)).
        constructor; [exact Hm1 | exact Hk'].
      + right. apply Exists_cons_hd. exists Θ', Φ'. simpl. refine (conj Hs (conj Hf _)).
        constructor; [exact Hm2 | exact Hk'].
    - right. apply Exists_cons_tl. exact Hstk.
  Qed.

  (** ST-MATCH-GUARD *)
  Lemma fail_step_guard : forall Θ Φ nf stk p g t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PGuard p g) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PGuard p g) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch p t ρ :: AGuard g ρ :: k)).
  Proof.
    intros Θ Φ nf stk p g t ρ k _. apply fsol_same_stack.
    intros [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [Hm Hk'].
    simpl in Hm. apply matches_inv_guard in Hm as [Hm Hg].
    exists Θ', Φ'. refine (conj Hs (conj Hf _)).
    constructor; [exact Hm | constructor; [exact Hg | exact Hk']].
  Qed.

  (** ST-CHECKGUARD-CONTINUE *)
  Lemma fail_step_checkguard_continue : forall Θ Φ nf stk g ρ k,
    inv (Running Θ Φ nf stk (AGuard g ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AGuard g ρ :: k)) ->
    fsol (Running Θ Φ nf stk k).
  Proof.
    intros Θ Φ nf stk g ρ k _. apply fsol_same_stack, can_complete_tail.
  Qed.

  (** ST-CHECKGUARD-BACKTRACK: every variable the guard reads is bound
      already ([wfk]), so the completion sees the same values. *)
  Lemma fail_step_checkguard_backtrack : forall Θ Φ nf stk g ρ k,
    eval_guard G (tsub Θ ρ) (fsub Φ ρ) g <> Some true ->
    inv (Running Θ Φ nf stk (AGuard g ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AGuard g ρ :: k)) ->
    fsol (backtrack nf stk).
  Proof.
    intros Θ Φ nf stk g ρ k Hng [[_ [_ [_ Hw]]] _]. simpl in Hw. destruct Hw as [Hg1 [Hg2 _]].
    apply fsol_dead_branch. intros [Θ' [Φ' [Hs [Hf Hk]]]].
    apply Forall_cons_iff in Hk as [Hm _]. simpl in Hm.
    apply Hng. rewrite <- Hm. apply eval_guard_agree.
    - intros y Hy. unfold tsub, gsub. destruct (vfind y (tenv ρ)) as [sl|] eqn:E; [|reflexivity].
      specialize (Hg1 y sl Hy E). unfold bound_in in Hg1.
      destruct (lookup sl Θ) as [v|] eqn:E2; [|congruence]. rewrite (Hs _ _ E2). reflexivity.
    - intros y Hy. unfold fsub, gsub. destruct (vfind y (fenv ρ)) as [sl|] eqn:E; [|reflexivity].
      specialize (Hg2 y sl Hy E). unfold bound_in in Hg2.
      destruct (lookup sl Φ) as [v|] eqn:E2; [|congruence]. rewrite (Hf _ _ E2). reflexivity.
  Qed.

  (** ST-MATCH-EXISTS: the witness [t'] of P-EXISTS goes to the fresh slot
      [nf], which nothing else in the state can see ([inv]). *)
  Lemma fail_step_exists : forall Θ Φ nf stk x p t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PExists x p) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PExists x p) t ρ :: k)) ->
    fsol (Running Θ Φ (S nf) stk (AMatch p t (env_add_t ρ x nf) :: ACheckName nf :: k)).
  Proof.
    intros Θ Φ nf stk x p t ρ k [[Hb1 [_ [Hk1 _]]] _].
    apply Forall_cons_iff in Hk1 as [[Ha1 _] Hk1'].
    apply fsol_same_stack. intros [Θ' [Φ' [Hs [Hf Hk]]]].
    apply Forall_cons_iff in Hk as [Hm Hk']. simpl in Hm.
    apply matches_inv_exists in Hm as [t' Hm].
    exists (extend nf t' Θ'), Φ'. refine (conj _ (conj Hf _)).
    - intros g v Hg. rewrite lookup_add_other; [apply Hs; exact Hg|]. eapply Hb1. exact Hg.
    - constructor; [|constructor].
      + simpl. eapply matches_ext; [| | exact Hm].
        * intros y. rewrite tsub_add_t. unfold upd.
          destruct (Nat.eqb x y); [rewrite lookup_extend_eq; reflexivity|].
          unfold tsub, gsub. destruct (vfind y (tenv ρ)) as [sl|] eqn:E; [|reflexivity].
          rewrite lookup_add_other; [reflexivity|]. eapply Ha1. exact E.
        * intros y. reflexivity.
      + simpl. rewrite lookup_extend_eq. discriminate.
      + eapply Forall_holds_agree; [| | exact Hk1' | exact Hk'].
        * intros g Hg. symmetry. apply lookup_add_other. exact Hg.
        * intros g _. reflexivity.
  Qed.

  (** ST-MATCH-EXISTS for [∃F]. *)
  Lemma fail_step_existsf : forall Θ Φ nf stk F p t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PExistsF F p) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PExistsF F p) t ρ :: k)) ->
    fsol (Running Θ Φ (S nf) stk (AMatch p t (env_add_f ρ F nf) :: ACheckFName nf :: k)).
  Proof.
    intros Θ Φ nf stk F p t ρ k [[_ [Hb2 [Hk1 _]]] _].
    apply Forall_cons_iff in Hk1 as [[_ Ha2] Hk1'].
    apply fsol_same_stack. intros [Θ' [Φ' [Hs [Hf Hk]]]].
    apply Forall_cons_iff in Hk as [Hm Hk']. simpl in Hm.
    apply matches_inv_existsf in Hm as [f Hm].
    exists Θ', (extend nf f Φ'). refine (conj Hs (conj _ _)).
    - intros g v Hg. rewrite lookup_add_other; [apply Hf; exact Hg|]. eapply Hb2. exact Hg.
    - constructor; [|constructor].
      + simpl. eapply matches_ext; [| | exact Hm].
        * intros y. reflexivity.
        * intros y. rewrite fsub_add_f. unfold upd.
          destruct (Nat.eqb F y); [rewrite lookup_extend_eq; reflexivity|].
          unfold fsub, gsub. destruct (vfind y (fenv ρ)) as [sl|] eqn:E; [|reflexivity].
          rewrite lookup_add_other; [reflexivity|]. eapply Ha2. exact E.
      + simpl. rewrite lookup_extend_eq. discriminate.
      + eapply Forall_holds_agree; [| | exact Hk1' | exact Hk'].
        * intros g _. reflexivity.
        * intros g Hg. symmetry. apply lookup_add_other. exact Hg.
  Qed.

  (** ST-CHECKNAME *)
  Lemma fail_step_checkname : forall Θ Φ nf stk s k,
    inv (Running Θ Φ nf stk (ACheckName s :: k)) ->
    fsol (Running Θ Φ nf stk (ACheckName s :: k)) ->
    fsol (Running Θ Φ nf stk k).
  Proof.
    intros Θ Φ nf stk s k _. apply fsol_same_stack, can_complete_tail.
  Qed.

  (** ST-CHECKNAME, backtrack: impossible, the slot is bound ([wfk]). *)
  Lemma fail_step_checkname_backtrack : forall Θ Φ nf stk s k,
    lookup s Θ = None ->
    inv (Running Θ Φ nf stk (ACheckName s :: k)) ->
    fsol (Running Θ Φ nf stk (ACheckName s :: k)) ->
    fsol (backtrack nf stk).
  Proof.
    intros Θ Φ nf stk s k Hnone [[_ [_ [_ Hw]]] _]. simpl in Hw. destruct Hw as [Hbound _].
    destruct (Hbound Hnone).
  Qed.

  (** ST-CHECKNAME for operator variables. *)
  Lemma fail_step_checkfname : forall Θ Φ nf stk s k,
    inv (Running Θ Φ nf stk (ACheckFName s :: k)) ->
    fsol (Running Θ Φ nf stk (ACheckFName s :: k)) ->
    fsol (Running Θ Φ nf stk k).
  Proof.
    intros Θ Φ nf stk s k _. apply fsol_same_stack, can_complete_tail.
  Qed.

  (** ST-CHECKNAME for operator variables, backtrack: impossible. *)
  Lemma fail_step_checkfname_backtrack : forall Θ Φ nf stk s k,
    lookup s Φ = None ->
    inv (Running Θ Φ nf stk (ACheckFName s :: k)) ->
    fsol (Running Θ Φ nf stk (ACheckFName s :: k)) ->
    fsol (backtrack nf stk).
  Proof.
    intros Θ Φ nf stk s k Hnone [[_ [_ [_ Hw]]] _]. simpl in Hw. destruct Hw as [Hbound _].
    destruct (Hbound Hnone).
  Qed.

  (** ST-MATCH-MATCHCONSTR *)
  Lemma fail_step_match_matchconstr : forall Θ Φ nf stk p p' x t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PConstr p p' x) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PConstr p p' x) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch p t ρ :: AMatchConstr p' x ρ :: k)).
  Proof.
    intros Θ Φ nf stk p p' x t ρ k _. apply fsol_same_stack.
    intros [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [Hm Hk'].
    simpl in Hm. apply matches_inv_constr in Hm as [t' [Hm [Hx Hm']]].
    exists Θ', Φ'. refine (conj Hs (conj Hf _)).
    constructor; [exact Hm | constructor; [| exact Hk']].
    simpl. exists t'. split; [exact Hx | exact Hm'].
  Qed.

  (** ST-MATCHCONSTR: the completion extends [θ], so it reads the same [t]. *)
  Lemma fail_step_matchconstr : forall Θ Φ nf stk p x ρ t k,
    tsub Θ ρ x = Some t ->
    inv (Running Θ Φ nf stk (AMatchConstr p x ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatchConstr p x ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch p t ρ :: k)).
  Proof.
    intros Θ Φ nf stk p x ρ t k Hx _. apply fsol_same_stack.
    intros [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [Hc Hk'].
    simpl in Hc. destruct Hc as [t' [Hx' Hm]].
    apply (sub_gsub _ _ (tenv ρ) Hs) in Hx. unfold tsub in Hx'. rewrite Hx in Hx'.
    injection Hx' as Ht. subst t'.
    exists Θ', Φ'. refine (conj Hs (conj Hf _)). constructor; [exact Hm | exact Hk'].
  Qed.

  (** ST-MATCHCONSTR, backtrack: impossible, [x] is bound ([wfk]). *)
  Lemma fail_step_matchconstr_backtrack : forall Θ Φ nf stk p x ρ k,
    tsub Θ ρ x = None ->
    inv (Running Θ Φ nf stk (AMatchConstr p x ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatchConstr p x ρ :: k)) ->
    fsol (backtrack nf stk).
  Proof.
    intros Θ Φ nf stk p x ρ k Hnone [[_ [_ [_ Hw]]] _]. simpl in Hw. destruct Hw as [Hw _].
    apply fsol_dead_branch. intros [Θ' [Φ' [_ [_ Hk]]]].
    apply Forall_cons_iff in Hk as [Hc _]. simpl in Hc. destruct Hc as [t' [Hx _]].
    apply tsub_var in Hx. destruct Hx as [sl [Hv _]].
    specialize (Hw sl Hv). unfold bound_in in Hw. unfold tsub, gsub in Hnone.
    rewrite Hv in Hnone. contradiction.
  Qed.

  (** ST-MATCH-FUN-VAR-BIND *)
  Lemma fail_step_funvar_bind : forall Θ Φ nf stk F ps t ρ s k,
    vfind F (fenv ρ) = Some s ->
    inv (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)) ->
    fsol (Running Θ (extend s (label G t) Φ) nf stk (push_matches ps (children G t) ρ k)).
  Proof.
    intros Θ Φ nf stk F ps t ρ s k HF _. apply fsol_same_stack.
    intros [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [Hm Hk'].
    simpl in Hm. apply matches_inv_funvar in Hm as [HFt Hps].
    exists Θ', Φ'. refine (conj Hs (conj _ _)).
    - apply extend_sub; [exact Hf |]. unfold fsub, gsub in HFt. rewrite HF in HFt. exact HFt.
    - apply Forall_push; [exact Hps | exact Hk'].
  Qed.

  (** ST-MATCH-FUN-VAR-BOUND *)
  Lemma fail_step_funvar_bound : forall Θ Φ nf stk F ps t ρ k,
    inv (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (push_matches ps (children G t) ρ k)).
  Proof.
    intros Θ Φ nf stk F ps t ρ k _. apply fsol_same_stack.
    intros [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [Hm Hk'].
    simpl in Hm. apply matches_inv_funvar in Hm as [_ Hps].
    exists Θ', Φ'. refine (conj Hs (conj Hf _)). apply Forall_push; [exact Hps | exact Hk'].
  Qed.

  (** ST-MATCH-FUN-VAR-CONFLICT: P-FUN-VAR needs [φ'(F)] to be the label
      and the arity to agree. *)
  Lemma fail_step_funvar_conflict : forall Θ Φ nf stk F ps t ρ k,
    (vfind F (fenv ρ) = None \/
     (exists f, fsub Φ ρ F = Some f /\ f <> label G t) \/
     length ps <> length (children G t)) ->
    inv (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)) ->
    fsol (backtrack nf stk).
  Proof.
    intros Θ Φ nf stk F ps t ρ k Hc _. apply fsol_dead_branch.
    intros [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [Hm _].
    simpl in Hm. apply matches_inv_funvar in Hm as [HFt Hps]. unfold fsub in HFt.
    destruct Hc as [Hnone|[[f [Hf' Hne]]|Hl]].
    - unfold gsub in HFt. rewrite Hnone in HFt. discriminate.
    - apply (sub_gsub _ _ (fenv ρ) Hf) in Hf'. congruence.
    - apply matches_list_length in Hps. contradiction.
  Qed.

  (** ST-MATCH-MU *)
  Lemma fail_step_mu : forall Θ Φ nf stk P xs Fs d t ρ k,
    nth_error D P = Some d ->
    inv (Running Θ Φ nf stk (AMatch (PCall P xs Fs) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PCall P xs Fs) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (body d) t (call_env ρ xs Fs) :: k)).
  Proof.
    intros Θ Φ nf stk P xs Fs d t ρ k HP _. apply fsol_same_stack.
    intros [Θ' [Φ' [Hs [Hf Hk]]]]. apply Forall_cons_iff in Hk as [Hm Hk'].
    simpl in Hm. apply matches_inv_mu in Hm as [d' [HP' [_ [_ Hm]]]].
    rewrite HP in HP'. injection HP' as Hd'. subst d'.
    exists Θ', Φ'. refine (conj Hs (conj Hf _)). constructor; [| exact Hk']. simpl.
    eapply matches_ext; [| | exact Hm]; intros y;
      unfold tsub, fsub, call_env; simpl; rewrite gsub_call_map; reflexivity.
  Qed.

  (** ST-MATCH-MU, bad call: P-MU needs the arities to agree. *)
  Lemma fail_step_mu_conflict : forall Θ Φ nf stk P xs Fs t ρ k,
    (forall d, nth_error D P = Some d ->
               length xs <> nparams d \/ length Fs <> nfparams d) ->
    inv (Running Θ Φ nf stk (AMatch (PCall P xs Fs) t ρ :: k)) ->
    fsol (Running Θ Φ nf stk (AMatch (PCall P xs Fs) t ρ :: k)) ->
    fsol (backtrack nf stk).
  Proof.
    intros Θ Φ nf stk P xs Fs t ρ k Hbad _. apply fsol_dead_branch.
    intros [Θ' [Φ' [_ [_ Hk]]]]. apply Forall_cons_iff in Hk as [Hm _].
    simpl in Hm. apply matches_inv_mu in Hm as [d [HP [Hxs [HFs _]]]].
    destruct (Hbad d HP) as [Hc|Hc]; contradiction.
  Qed.

  (** One line per rule of [step]. *)
  Lemma fsol_step : forall st st', step G D st st' -> inv st -> fsol st -> fsol st'.
  Proof.
    intros st st' Hst. destruct Hst.
    - (* ST-SUCCESS *)                apply fail_step_success.
    - (* ST-MATCH-VAR-BIND *)         apply fail_step_var_bind; assumption.
    - (* ST-MATCH-VAR-BOUND *)        apply fail_step_var_bound.
    - (* ST-MATCH-VAR-CONFLICT *)     apply fail_step_var_conflict; assumption.
    - (* ST-MATCH-FUN *)              apply fail_step_fun.
    - (* ST-MATCH-FUN-CONFLICT *)     apply fail_step_fun_conflict; assumption.
    - (* ST-MATCH-ALT *)              apply fail_step_alt.
    - (* ST-MATCH-GUARD *)            apply fail_step_guard.
    - (* ST-CHECKGUARD-CONTINUE *)    apply fail_step_checkguard_continue.
    - (* ST-CHECKGUARD-BACKTRACK *)   apply fail_step_checkguard_backtrack; assumption.
    - (* ST-MATCH-EXISTS *)           apply fail_step_exists.
    - (* ST-MATCH-EXISTS for ∃F *)    apply fail_step_existsf.
    - (* ST-CHECKNAME *)              apply fail_step_checkname.
    - (* ST-CHECKNAME, backtrack *)   apply fail_step_checkname_backtrack; assumption.
    - (* ST-CHECKFNAME *)             apply fail_step_checkfname.
    - (* ST-CHECKFNAME, backtrack *)  apply fail_step_checkfname_backtrack; assumption.
    - (* ST-MATCH-MATCHCONSTR *)      apply fail_step_match_matchconstr.
    - (* ST-MATCHCONSTR *)            apply fail_step_matchconstr; assumption.
    - (* ST-MATCHCONSTR, backtrack *) apply fail_step_matchconstr_backtrack; assumption.
    - (* ST-MATCH-FUN-VAR-BIND *)     apply fail_step_funvar_bind; assumption.
    - (* ST-MATCH-FUN-VAR-BOUND *)    apply fail_step_funvar_bound.
    - (* ST-MATCH-FUN-VAR-CONFLICT *) apply fail_step_funvar_conflict; assumption.
    - (* ST-MATCH-MU *)               apply fail_step_mu; assumption.
    - (* ST-MATCH-MU, bad call *)     apply fail_step_mu_conflict; assumption.
  Qed.

  Lemma fsol_star : wf_defs D = true ->
    forall st st', star G D st st' -> inv st -> fsol st -> fsol st'.
  Proof.
    intros Hd st st' Hstar.
    induction Hstar as [st|st st1 st2 Hst _ IH]; intros Hi Hf; [exact Hf|].
    apply IH; [exact (inv_step Hd _ _ Hst Hi) | exact (fsol_step _ _ Hst Hi Hf)].
  Qed.

  (** A finite map holding [σ]'s values below [n]. *)
  Fixpoint of_fun (n : nat) (σ : nat -> option nat) : subst :=
    match n with
    | O => empty
    | S n' =>
        match σ n' with
        | Some v => extend n' v (of_fun n' σ)
        | None => of_fun n' σ
        end
    end.

  Lemma lookup_of_fun : forall n σ x,
    lookup x (of_fun n σ) = if Nat.ltb x n then σ x else None.
  Proof.
    induction n as [|n IH]; intros σ x; simpl.
    - apply lookup_empty.
    - assert (Hlt : Nat.ltb x (S n) = Nat.ltb x n || Nat.eqb x n).
      { destruct (Nat.ltb x n) eqn:L1; destruct (Nat.eqb x n) eqn:L2;
          destruct (Nat.ltb x (S n)) eqn:L3;
          rewrite ?Nat.ltb_lt, ?Nat.ltb_ge, ?Nat.eqb_eq, ?Nat.eqb_neq in *; auto; lia. }
      rewrite Hlt. destruct (Nat.eqb x n) eqn:E.
      + apply Nat.eqb_eq in E. subst. rewrite Nat.ltb_irrefl. simpl.
        destruct (σ n) eqn:Hs.
        * apply lookup_extend_eq.
        * rewrite IH, Nat.ltb_irrefl. reflexivity.
      + rewrite orb_false_r. apply Nat.eqb_neq in E.
        destruct (σ n) eqn:Hs.
        * rewrite lookup_extend_neq by auto. apply IH.
        * apply IH.
  Qed.

  Lemma gsub_ident_of_fun : forall n σ x,
    (forall y, n <= y -> σ y = None) -> gsub (of_fun n σ) (ident_map n) x = σ x.
  Proof.
    intros n σ x Hd. unfold gsub. rewrite vfind_ident_map.
    destruct (Nat.ltb x n) eqn:L.
    - rewrite lookup_of_fun, L. reflexivity.
    - rewrite Nat.ltb_ge in L. symmetry. apply Hd. exact L.
  Qed.

  (** Theorem 2, second half: if the machine fails, no substitution of the
      root's variables ([0..n-1], operator variables [0..m-1]) matches. *)
  Theorem failure_soundness : forall n m p t,
    wf_defs D = true -> wfb D p = true ->
    star G D (init n m p t) Failure ->
    forall σ ψ, (forall x, n <= x -> σ x = None) -> (forall F, m <= F -> ψ F = None) ->
    ~ matches G D σ ψ p t.
  Proof.
    intros n m p t Hd Hw H σ ψ Hσ Hψ Hm.
    assert (Hf : fsol Failure).
    { eapply fsol_star; eauto.
      - simpl. refine (conj (conj _ (conj _ (conj _ _))) (Forall_nil _)).
        + intros g v Hg. rewrite lookup_empty in Hg. discriminate.
        + intros g v Hg. rewrite lookup_empty in Hg. discriminate.
        + constructor; [|constructor]. split; simpl; intros x g Hx;
            rewrite vfind_ident_map in Hx; destruct (Nat.ltb x _) eqn:L;
            inversion Hx; subst; apply Nat.ltb_lt in L; lia.
        + simpl. split; [exact Hw | exact I].
      - simpl. left. exists (of_fun n σ), (of_fun m ψ).
        split; [apply sub_empty|split; [apply sub_empty|]].
        constructor; [|constructor]. simpl.
        eapply matches_ext; [| |exact Hm]; intros y; unfold tsub, fsub; simpl;
          symmetry; apply gsub_ident_of_fun; auto. }
    exact Hf.
  Qed.

  (** ** The extracted matcher is sound *)

  Theorem match_pattern_sound : forall fuel n m p t Θ Φ,
    match_pattern G D fuel n m p t = OSuccess Θ Φ ->
    matches G D (tsub Θ (root_env n m)) (fsub Φ (root_env n m)) p t.
  Proof.
    intros fuel n m p t Θ Φ Hrun. apply success_soundness.
    eapply run_refines_success. exact Hrun.
  Qed.

  Theorem match_pattern_fail_sound : forall fuel n m p t,
    wf_defs D = true -> wfb D p = true ->
    match_pattern G D fuel n m p t = OFailure ->
    forall σ ψ, (forall x, n <= x -> σ x = None) -> (forall F, m <= F -> ψ F = None) ->
    ~ matches G D σ ψ p t.
  Proof.
    intros fuel n m p t Hd Hw Hrun.
    eapply failure_soundness; [exact Hd | exact Hw |]. eapply run_refines_failure. exact Hrun.
  Qed.
End Soundness.
