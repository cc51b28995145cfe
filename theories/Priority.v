(** * Which answer: the priority (first-solution) specification

    [match_pattern_sound] says the machine's answer is *some* declarative
    match. This file says *which* one, for the call-free, [∃]-free fragment
    of the calculus (variables, operator applications, alternation, guards,
    match constraints, operator variables; see [in_frag]).

    [solutions G σ ψ p t] is the ordered list of the declarative matches
    of [p] at [t] extending ⟨σ, ψ⟩, in the style of Linden's backtracking
    trees: it is defined by recursion on the pattern, not by running the
    machine.
    - [x]: the one solution binding [x] to [t] (or keeping ⟨σ, ψ⟩ if
      [σ(x) = t]), none if [σ(x)] is another node;
    - [f(p1..pn)]: the solutions of [p1], and for each of them, in order,
      the solutions of [p2..pn] extending it (lexicographic order: the
      leftmost argument's choice varies slowest);
    - [p1 ‖ p2]: the solutions of [p1], then those of [p2] (P-ALT-1 is
      tried first, as ST-MATCH-ALT pushes [p2] as the backtrack frame);
    - [p ; guard(g)]: the solutions of [p] whose guard is true, in order;
    - [p ; (p' ≈ x)]: for each solution of [p], the solutions of [p'] at
      the node bound to [x];
    - [F(p1..pn)]: as [f(p1..pn)], with [F] bound to [t]'s operator first.

    Theorems ([first_solution], [first_solution_complete]): for a pattern
    of the fragment whose variables are in the root's scope, if
    [match_pattern] answers [OSuccess Θ Φ] then [solutions] is not empty
    and ⟨Θ, Φ⟩ (read through the root's scope) is its FIRST element; if it
    answers [OFailure], [solutions] is empty; and if [solutions] has a first
    element, enough fuel makes [match_pattern] return it. [solutions_sound]
    says every element is a declarative match, so the list is a
    specification of "the matches in priority order".

    Not covered: pattern calls [P(x..)] and [∃x.p] / [∃F.p] (the solutions
    of a recursive pattern may be an infinite sequence, and [∃] introduces
    the machine's fresh slots, so these need a coinductive or fuelled
    specification); their [solutions] is [] here and [in_frag] excludes
    them. *)

From Coq Require Import ZArith List Bool Arith Lia.
From PyPM Require Import Syntax Subst Declarative Env Algorithmic Interpreter Soundness
  RootIndex Entry.
Import ListNotations.

Section Priority.
  Variable G : graph.
  Variable D : list pdef.

  Definition sol := (tsubst * fsubst)%type.

  Definition guard_ok (σ : tsubst) (ψ : fsubst) (g : guard) : bool :=
    match eval_guard G σ ψ g with Some true => true | _ => false end.

  (** The list premise of P-FUN, for a given [solutions] of one argument. *)
  Definition sols_list_with (rec : tsubst -> fsubst -> pattern -> node -> list sol) :=
    fix go (σ : tsubst) (ψ : fsubst) (ps : list pattern) (ts : list node) : list sol :=
      match ps, ts with
      | [], [] => [(σ, ψ)]
      | q :: ps', u :: ts' =>
          flat_map (fun s => go (fst s) (snd s) ps' ts') (rec σ ψ q u)
      | _, _ => []
      end.

  (** The ordered solutions of [p] at [t] extending ⟨σ, ψ⟩. *)
  Fixpoint solutions (σ : tsubst) (ψ : fsubst) (p : pattern) (t : node) {struct p}
    : list sol :=
    match p with
    | PVar x =>
        match σ x with
        | Some t' => if Nat.eqb t' t then [(σ, ψ)] else []
        | None => [(upd σ x t, ψ)]
        end
    | PApp f ps =>
        if Nat.eqb (label G t) f then sols_list_with solutions σ ψ ps (children G t) else []
    | PAlt p1 p2 => solutions σ ψ p1 t ++ solutions σ ψ p2 t
    | PGuard p g => filter (fun s => guard_ok (fst s) (snd s) g) (solutions σ ψ p t)
    | PConstr p p' x =>
        flat_map (fun s => match fst s x with
                           | Some t' => solutions (fst s) (snd s) p' t'
                           | None => []
                           end) (solutions σ ψ p t)
    | PFunVar F ps =>
        match ψ F with
        | Some f =>
            if Nat.eqb f (label G t) then sols_list_with solutions σ ψ ps (children G t)
            else []
        | None => sols_list_with solutions σ (upd ψ F (label G t)) ps (children G t)
        end
    | PExists _ _ | PExistsF _ _ | PCall _ _ _ => []
    end.

  Definition solutions_list := sols_list_with solutions.

  (** The fragment: no call, no [∃]; term variables below [n], operator
      variables below [m] (the root's scope). *)
  Fixpoint in_frag (n m : nat) (p : pattern) : bool :=
    match p with
    | PVar x => Nat.ltb x n
    | PApp _ ps => forallb (in_frag n m) ps
    | PAlt p1 p2 => in_frag n m p1 && in_frag n m p2
    | PGuard p _ => in_frag n m p
    | PConstr p p' _ => in_frag n m p && in_frag n m p'
    | PFunVar F ps => Nat.ltb F m && forallb (in_frag n m) ps
    | PExists _ _ | PExistsF _ _ | PCall _ _ _ => false
    end.

  (** ** Continuations of the specification

      [ksols σ ψ k L]: the ordered solutions of the list of pending items
      [k] from ⟨σ, ψ⟩ are [L]. A bridge between [solutions] (a function of
      the pattern) and the machine (which keeps a continuation). *)
  Inductive item :=
  | IMatch (p : pattern) (t : node)
  | IGuard (g : guard)
  | IConstr (p : pattern) (x : var).

  Fixpoint items (ps : list pattern) (ts : list node) (k : list item) : list item :=
    match ps, ts with
    | p :: ps', t :: ts' => IMatch p t :: items ps' ts' k
    | _, _ => k
    end.

  Inductive ksols : tsubst -> fsubst -> list item -> list sol -> Prop :=
  | K_Nil : forall σ ψ, ksols σ ψ [] [(σ, ψ)]
  | K_VarBound : forall σ ψ x t k L,
      σ x = Some t -> ksols σ ψ k L -> ksols σ ψ (IMatch (PVar x) t :: k) L
  | K_VarConflict : forall σ ψ x t t' k,
      σ x = Some t' -> t' <> t -> ksols σ ψ (IMatch (PVar x) t :: k) []
  | K_VarBind : forall σ ψ x t k L,
      σ x = None -> ksols (upd σ x t) ψ k L -> ksols σ ψ (IMatch (PVar x) t :: k) L
  | K_App : forall σ ψ f ps t k L,
      label G t = f -> length ps = length (children G t) ->
      ksols σ ψ (items ps (children G t) k) L -> ksols σ ψ (IMatch (PApp f ps) t :: k) L
  | K_AppConflict : forall σ ψ f ps t k,
      label G t <> f \/ length ps <> length (children G t) ->
      ksols σ ψ (IMatch (PApp f ps) t :: k) []
  | K_Alt : forall σ ψ p1 p2 t k L1 L2,
      ksols σ ψ (IMatch p1 t :: k) L1 -> ksols σ ψ (IMatch p2 t :: k) L2 ->
      ksols σ ψ (IMatch (PAlt p1 p2) t :: k) (L1 ++ L2)
  | K_Guard : forall σ ψ p g t k L,
      ksols σ ψ (IMatch p t :: IGuard g :: k) L -> ksols σ ψ (IMatch (PGuard p g) t :: k) L
  | K_GuardTrue : forall σ ψ g k L,
      eval_guard G σ ψ g = Some true -> ksols σ ψ k L -> ksols σ ψ (IGuard g :: k) L
  | K_GuardFalse : forall σ ψ g k,
      eval_guard G σ ψ g <> Some true -> ksols σ ψ (IGuard g :: k) []
  | K_Constr : forall σ ψ p p' x t k L,
      ksols σ ψ (IMatch p t :: IConstr p' x :: k) L ->
      ksols σ ψ (IMatch (PConstr p p' x) t :: k) L
  | K_ConstrSome : forall σ ψ p x t k L,
      σ x = Some t -> ksols σ ψ (IMatch p t :: k) L -> ksols σ ψ (IConstr p x :: k) L
  | K_ConstrNone : forall σ ψ p x k,
      σ x = None -> ksols σ ψ (IConstr p x :: k) []
  | K_FunVarBound : forall σ ψ F ps t k L,
      ψ F = Some (label G t) -> length ps = length (children G t) ->
      ksols σ ψ (items ps (children G t) k) L -> ksols σ ψ (IMatch (PFunVar F ps) t :: k) L
  | K_FunVarConflict : forall σ ψ F ps t k,
      (exists f, ψ F = Some f /\ f <> label G t) \/ length ps <> length (children G t) ->
      ksols σ ψ (IMatch (PFunVar F ps) t :: k) []
  | K_FunVarBind : forall σ ψ F ps t k L,
      ψ F = None -> length ps = length (children G t) ->
      ksols σ (upd ψ F (label G t)) (items ps (children G t) k) L ->
      ksols σ ψ (IMatch (PFunVar F ps) t :: k) L.

  Lemma flat_map_nil : forall A B (l : list A),
    flat_map (fun _ : A => @nil B) l = [].
  Proof. induction l; simpl; auto. Qed.

  Lemma flat_map_flat_map : forall A B C (f : B -> list C) (h : A -> list B) l,
    flat_map f (flat_map h l) = flat_map (fun a => flat_map f (h a)) l.
  Proof.
    induction l as [|a l IH]; simpl; auto. rewrite flat_map_app, IH. reflexivity.
  Qed.

  Lemma flat_map_filter : forall A B (f : A -> list B) (c : A -> bool) l,
    flat_map f (filter c l) = flat_map (fun a => if c a then f a else []) l.
  Proof.
    induction l as [|a l IH]; simpl; auto. destruct (c a); simpl; rewrite IH; auto.
  Qed.

  Lemma solutions_list_len : forall ps σ ψ ts,
    length ps <> length ts -> solutions_list σ ψ ps ts = [].
  Proof.
    induction ps as [|q ps IH]; intros σ ψ ts H; destruct ts as [|u ts]; simpl in *;
      try reflexivity; try congruence.
    unfold solutions_list in IH.
    erewrite flat_map_ext; [apply flat_map_nil|]. intros s. apply IH. congruence.
  Qed.

  Lemma solutions_list_cons : forall σ ψ q ps u ts,
    solutions_list σ ψ (q :: ps) (u :: ts) =
    flat_map (fun s => solutions_list (fst s) (snd s) ps ts) (solutions σ ψ q u).
  Proof. reflexivity. Qed.

  Section Frag.
    Variables n m : nat.

    Definition KP (p : pattern) : Prop :=
      in_frag n m p = true ->
      forall σ ψ t k (Ls : sol -> list sol),
        (forall σ' ψ', ksols σ' ψ' k (Ls (σ', ψ'))) ->
        ksols σ ψ (IMatch p t :: k) (flat_map Ls (solutions σ ψ p t)).

    Lemma ksols_list : forall ps, Forall KP ps -> forallb (in_frag n m) ps = true ->
      forall σ ψ ts k (Ls : sol -> list sol),
        length ps = length ts ->
        (forall σ' ψ', ksols σ' ψ' k (Ls (σ', ψ'))) ->
        ksols σ ψ (items ps ts k) (flat_map Ls (solutions_list σ ψ ps ts)).
    Proof.
      induction 1 as [|q ps Hq Hps IH]; intros Hf σ ψ ts k Ls Hl HL;
        destruct ts as [|u ts]; simpl in Hl; try discriminate.
      - simpl. rewrite app_nil_r. apply HL.
      - simpl in Hf. apply andb_prop in Hf. destruct Hf as [Hf1 Hf2].
        rewrite solutions_list_cons, flat_map_flat_map. simpl.
        apply (Hq Hf1 σ ψ u (items ps ts k)
                 (fun s => flat_map Ls (solutions_list (fst s) (snd s) ps ts))).
        intros σ' ψ'. simpl. apply IH; auto.
    Qed.

    Lemma ksols_solutions : forall p, KP p.
    Proof.
      induction p as [x|f ps Hps|p1 p2 IHp1 IHp2|p g IHp|x p IHp|F p IHp|p p' x IHp1 IHp2|F ps Hps|Q xs Fs]
        using pattern_ind'; unfold KP;
        intros Hf σ ψ t k Ls HL; simpl in Hf.
      - (* x *) simpl. destruct (σ x) as [t'|] eqn:Hx.
        + destruct (Nat.eqb t' t) eqn:E.
          * apply Nat.eqb_eq in E. subst. simpl. rewrite app_nil_r.
            apply K_VarBound; auto.
          * apply Nat.eqb_neq in E. eapply K_VarConflict; eauto.
        + simpl. rewrite app_nil_r. apply K_VarBind; auto.
      - (* f(ps) *) simpl. destruct (Nat.eqb (label G t) f) eqn:E.
        + apply Nat.eqb_eq in E.
          destruct (Nat.eq_dec (length ps) (length (children G t))) as [Hl|Hl].
          * apply K_App; auto. apply ksols_list; auto.
          * pose proof (solutions_list_len ps σ ψ (children G t) Hl) as Hn.
            unfold solutions_list in Hn. rewrite Hn. apply K_AppConflict. auto.
        + apply Nat.eqb_neq in E. apply K_AppConflict. auto.
      - (* p1 ‖ p2 *) apply andb_prop in Hf. destruct Hf.
        simpl. rewrite flat_map_app. apply K_Alt; [apply IHp1 | apply IHp2]; auto.
      - (* guard *) simpl. rewrite flat_map_filter. apply K_Guard.
        apply (IHp Hf σ ψ t (IGuard g :: k)
                 (fun s => if guard_ok (fst s) (snd s) g then Ls s else [])).
        intros σ' ψ'. simpl. unfold guard_ok.
        destruct (eval_guard G σ' ψ' g) as [[|]|] eqn:E.
        + apply K_GuardTrue; auto.
        + apply K_GuardFalse. congruence.
        + apply K_GuardFalse. congruence.
      - (* ∃x *) discriminate.
      - (* ∃F *) discriminate.
      - (* constraint *) apply andb_prop in Hf. destruct Hf as [Hf1 Hf2].
        simpl. rewrite flat_map_flat_map. apply K_Constr.
        apply (IHp1 Hf1 σ ψ t (IConstr p' x :: k)
                 (fun s => flat_map Ls (match fst s x with
                                        | Some t' => solutions (fst s) (snd s) p' t'
                                        | None => [] end))).
        intros σ' ψ'. simpl. destruct (σ' x) as [t'|] eqn:Hx.
        + apply K_ConstrSome with (t := t'); auto.
        + apply K_ConstrNone. auto.
      - (* F(ps) *) apply andb_prop in Hf. destruct Hf as [_ Hf]. simpl.
        destruct (Nat.eq_dec (length ps) (length (children G t))) as [Hl|Hl].
        + destruct (ψ F) as [f|] eqn:HF.
          * destruct (Nat.eqb f (label G t)) eqn:E.
            -- apply Nat.eqb_eq in E. subst. apply K_FunVarBound; auto.
               apply ksols_list; auto.
            -- apply Nat.eqb_neq in E. apply K_FunVarConflict. left. eauto.
          * apply K_FunVarBind; auto. apply ksols_list; auto.
        + pose proof (solutions_list_len ps) as Hn. unfold solutions_list in Hn.
          destruct (ψ F) as [f|]; [destruct (Nat.eqb f (label G t))|];
            rewrite ?Hn by exact Hl; simpl; apply K_FunVarConflict; auto.
      - (* call *) discriminate.
    Qed.
  End Frag.
  (** ** The machine follows the specification *)

  Section Machine.
    Variables n m : nat.

    Definition ρ0 : env := root_env n m.

    Definition to_action (i : item) : action :=
      match i with
      | IMatch p t => AMatch p t ρ0
      | IGuard g => AGuard g ρ0
      | IConstr p x => AMatchConstr p x ρ0
      end.

    Definition item_ok (i : item) : Prop :=
      match i with
      | IMatch p _ | IConstr p _ => in_frag n m p = true
      | IGuard _ => True
      end.

    (** ⟨Θ, Φ⟩ read through the root's scope is ⟨σ, ψ⟩. *)
    Definition rel (Θ Φ : subst) (σ : tsubst) (ψ : fsubst) : Prop :=
      (forall x, tsub Θ ρ0 x = σ x) /\ (forall F, fsub Φ ρ0 F = ψ F).

    (** What the machine does from [st] with saved frames [stk] below it:
        it succeeds with the first solution, or gives up to [stk]. *)
    Definition first_out (L : list sol) (st : state) (nf : nat) (stk : list frame) : Prop :=
      match L with
      | [] => star G D st (backtrack nf stk)
      | (σ', ψ') :: _ => exists Θ' Φ', star G D st (Success Θ' Φ') /\ rel Θ' Φ' σ' ψ'
      end.

    Definition behaves (σ : tsubst) (ψ : fsubst) (k : list item) (L : list sol) : Prop :=
      forall Θ Φ nf stk, rel Θ Φ σ ψ -> Forall item_ok k ->
        first_out L (Running Θ Φ nf stk (map to_action k)) nf stk.

    Lemma star_trans' : forall st1 st2 st3,
      star G D st1 st2 -> star G D st2 st3 -> star G D st1 st3.
    Proof.
      intros st1 st2 st3 H. induction H; auto. intros. eapply star_step; eauto.
    Qed.

    Lemma star_first_out : forall L st st' nf stk,
      star G D st st' -> first_out L st' nf stk -> first_out L st nf stk.
    Proof.
      intros [|[σ' ψ'] L] st st' nf stk Hs H; simpl in *.
      - eapply star_trans'; eauto.
      - destruct H as (Θ' & Φ' & H1 & H2). exists Θ', Φ'. split; auto.
        eapply star_trans'; eauto.
    Qed.

    Lemma step_first_out : forall L st st' nf stk,
      step G D st st' -> first_out L st' nf stk -> first_out L st nf stk.
    Proof.
      intros. eapply star_first_out; [|eauto]. eapply star_step; [eauto|apply star_refl].
    Qed.

    Lemma tsub_root : forall Θ x,
      tsub Θ ρ0 x = if Nat.ltb x n then lookup x Θ else None.
    Proof.
      intros. unfold tsub, gsub, ρ0, root_env. simpl. rewrite vfind_ident_map.
      destruct (Nat.ltb x n); reflexivity.
    Qed.

    Lemma fsub_root : forall Φ F,
      fsub Φ ρ0 F = if Nat.ltb F m then lookup F Φ else None.
    Proof.
      intros. unfold fsub, gsub, ρ0, root_env. simpl. rewrite vfind_ident_map.
      destruct (Nat.ltb F m); reflexivity.
    Qed.

    Lemma rel_bind_t : forall Θ Φ σ ψ x t,
      rel Θ Φ σ ψ -> x < n -> rel (extend x t Θ) Φ (upd σ x t) ψ.
    Proof.
      intros Θ Φ σ ψ x t [Hs Hf] Hx. split; auto. intros y.
      rewrite tsub_root. unfold upd. rewrite <- Hs, tsub_root.
      destruct (Nat.eqb x y) eqn:E.
      - apply Nat.eqb_eq in E. subst. rewrite (proj2 (Nat.ltb_lt y n) Hx).
        apply lookup_extend_eq.
      - apply Nat.eqb_neq in E. destruct (Nat.ltb y n); auto.
        apply lookup_extend_neq. exact E.
    Qed.

    Lemma rel_bind_f : forall Θ Φ σ ψ F f,
      rel Θ Φ σ ψ -> F < m -> rel Θ (extend F f Φ) σ (upd ψ F f).
    Proof.
      intros Θ Φ σ ψ F f [Hs Hf] HF. split; auto. intros y.
      rewrite fsub_root. unfold upd. rewrite <- Hf, fsub_root.
      destruct (Nat.eqb F y) eqn:E.
      - apply Nat.eqb_eq in E. subst. rewrite (proj2 (Nat.ltb_lt y m) HF).
        apply lookup_extend_eq.
      - apply Nat.eqb_neq in E. destruct (Nat.ltb y m); auto.
        apply lookup_extend_neq. exact E.
    Qed.

    Lemma eval_guard_ext : forall σ σ' ψ ψ' g,
      (forall x, σ x = σ' x) -> (forall F, ψ F = ψ' F) ->
      eval_guard G σ ψ g = eval_guard G σ' ψ' g.
    Proof.
      intros σ σ' ψ ψ' g Hs Hf.
      assert (E1 : ext σ σ') by (intros x v H; rewrite <- Hs; exact H).
      assert (E2 : ext σ' σ) by (intros x v H; rewrite Hs; exact H).
      assert (E3 : ext ψ ψ') by (intros x v H; rewrite <- Hf; exact H).
      assert (E4 : ext ψ' ψ) by (intros x v H; rewrite Hf; exact H).
      destruct (eval_guard G σ ψ g) as [b|] eqn:E.
      - symmetry. eapply eval_guard_mono; eauto.
      - destruct (eval_guard G σ' ψ' g) as [b|] eqn:E'; auto.
        eapply eval_guard_mono in E'; eauto. congruence.
    Qed.

    Lemma map_items : forall ps ts k,
      map to_action (items ps ts k) = push_matches ps ts ρ0 (map to_action k).
    Proof.
      induction ps as [|p ps IH]; intros [|t ts] k; simpl; auto. rewrite IH. reflexivity.
    Qed.

    Lemma Forall_items : forall ps ts k,
      forallb (in_frag n m) ps = true -> Forall item_ok k -> Forall item_ok (items ps ts k).
    Proof.
      induction ps as [|p ps IH]; intros [|t ts] k Hp Hk; simpl in *; auto.
      apply andb_prop in Hp. destruct Hp. constructor; auto.
    Qed.

    Ltac step_to st := apply step_first_out with (st' := st).

    Theorem ksols_behaves : forall σ ψ k L, ksols σ ψ k L -> behaves σ ψ k L.
    Proof.
      induction 1; intros Θ Φ nf stk Hr Hk; simpl map;
        destruct Hr as [Hs Hf].
      - (* [] *) simpl. exists Θ, Φ. split; [|split; auto].
        eapply star_step; [apply ST_Success | apply star_refl].
      - (* x bound *) step_to (Running Θ Φ nf stk (map to_action k)).
        + apply ST_Match_Var_Bound. rewrite Hs. exact H.
        + inversion Hk; subst. apply IHksols; auto. split; auto.
      - (* x conflict *) simpl. eapply star_step; [|apply star_refl].
        apply ST_Match_Var_Conflict. right. exists t'. rewrite Hs. auto.
      - (* x bind *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        apply Nat.ltb_lt in Hi.
        step_to (Running (extend x t Θ) Φ nf stk (map to_action k)).
        + apply ST_Match_Var_Bind with (s := x).
          * unfold ρ0, root_env. simpl. rewrite vfind_ident_map.
            rewrite (proj2 (Nat.ltb_lt x n) Hi). reflexivity.
          * specialize (Hs x). rewrite tsub_root, (proj2 (Nat.ltb_lt x n) Hi) in Hs.
            congruence.
        + apply IHksols; auto. apply rel_bind_t; auto. split; auto.
      - (* f(ps) *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        step_to (Running Θ Φ nf stk (push_matches ps (children G t) ρ0 (map to_action k))).
        + apply ST_Match_Fun; auto.
        + rewrite <- map_items. apply IHksols; [split; auto|]. apply Forall_items; auto.
      - (* f(ps) conflict *) simpl. eapply star_step; [|apply star_refl].
        apply ST_Match_Fun_Conflict. exact H.
      - (* p1 ‖ p2 *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        apply andb_prop in Hi. destruct Hi as [Hi1 Hi2].
        step_to (Running Θ Φ nf ((Θ, Φ, AMatch p2 t ρ0 :: map to_action k) :: stk)
                         (AMatch p1 t ρ0 :: map to_action k)).
        + apply ST_Match_Alt.
        + specialize (IHksols1 Θ Φ nf ((Θ, Φ, AMatch p2 t ρ0 :: map to_action k) :: stk)
                        (conj Hs Hf) (Forall_cons (IMatch p1 t) (Hi1 : item_ok (IMatch p1 t)) Hk')).
          destruct L1 as [|[σ1 ψ1] L1]; simpl in IHksols1 |- *.
          * eapply star_first_out; [exact IHksols1|].
            apply IHksols2; [split; auto | constructor; auto].
          * exact IHksols1.
      - (* guard *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        step_to (Running Θ Φ nf stk (AMatch p t ρ0 :: AGuard g ρ0 :: map to_action k)).
        + apply ST_Match_Guard.
        + apply (IHksols Θ Φ nf stk); [split; auto|]. repeat constructor; auto.
      - (* guard true *) inversion Hk as [|? ? Hi Hk']; subst.
        step_to (Running Θ Φ nf stk (map to_action k)).
        + apply ST_CheckGuard_Continue. rewrite <- H. apply eval_guard_ext; auto.
        + apply IHksols; auto. split; auto.
      - (* guard false *) simpl. eapply star_step; [|apply star_refl].
        apply ST_CheckGuard_Backtrack. erewrite eval_guard_ext; eauto.
      - (* p ; (p' ≈ x) *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        apply andb_prop in Hi. destruct Hi as [Hi1 Hi2].
        step_to (Running Θ Φ nf stk (AMatch p t ρ0 :: AMatchConstr p' x ρ0 :: map to_action k)).
        + apply ST_Match_MatchConstr.
        + apply (IHksols Θ Φ nf stk); [split; auto|]. repeat constructor; auto.
      - (* constraint, x bound *) inversion Hk as [|? ? Hi Hk']; subst.
        step_to (Running Θ Φ nf stk (AMatch p t ρ0 :: map to_action k)).
        + apply ST_MatchConstr. rewrite Hs. exact H.
        + apply (IHksols Θ Φ nf stk); [split; auto|]. constructor; auto.
      - (* constraint, x unbound *) simpl. eapply star_step; [|apply star_refl].
        apply ST_MatchConstr_Backtrack. rewrite Hs. exact H.
      - (* F(ps) bound *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        apply andb_prop in Hi. destruct Hi as [_ Hi].
        step_to (Running Θ Φ nf stk (push_matches ps (children G t) ρ0 (map to_action k))).
        + apply ST_Match_FunVar_Bound; auto. rewrite Hf. exact H.
        + rewrite <- map_items. apply IHksols; [split; auto|]. apply Forall_items; auto.
      - (* F(ps) conflict *) simpl. eapply star_step; [|apply star_refl].
        apply ST_Match_FunVar_Conflict. destruct H as [[f [H1 H2]]|H]; auto.
        right. left. exists f. rewrite Hf. auto.
      - (* F(ps) bind *) inversion Hk as [|? ? Hi Hk']; subst. simpl in Hi.
        apply andb_prop in Hi. destruct Hi as [HF Hi]. apply Nat.ltb_lt in HF.
        step_to (Running Θ (extend F (label G t) Φ) nf stk
                   (push_matches ps (children G t) ρ0 (map to_action k))).
        + apply ST_Match_FunVar_Bind with (s := F); auto.
          * unfold ρ0, root_env. simpl. rewrite vfind_ident_map.
            rewrite (proj2 (Nat.ltb_lt F m) HF). reflexivity.
          * specialize (Hf F). rewrite fsub_root, (proj2 (Nat.ltb_lt F m) HF) in Hf.
            rewrite Hf. exact H.
        + rewrite <- map_items. apply IHksols; [|apply Forall_items; auto].
          apply rel_bind_f; auto. split; auto.
    Qed.
  End Machine.

  (** ** The machine's answer is the first solution *)

  Definition none_t : tsubst := fun _ => None.
  Definition none_f : fsubst := fun _ => None.

  Lemma star_terminal_det : forall st st1 st2,
    star G D st st1 -> star G D st st2 ->
    (forall st', ~ step G D st1 st') -> (forall st', ~ step G D st2 st') -> st1 = st2.
  Proof.
    intros st st1 st2 H1. revert st2. induction H1 as [st|st sa st1 Hs Hr IH];
      intros st2 H2 T1 T2.
    - destruct H2 as [|st sb st2 Hs2 _]; auto. exfalso. eapply T1; eauto.
    - destruct H2 as [|st sb st2 Hs2 Hr2].
      + exfalso. eapply T2; eauto.
      + apply step_deterministic_fn in Hs, Hs2. subst. apply IH; auto.
  Qed.

  Lemma success_terminal : forall Θ Φ st, ~ step G D (Success Θ Φ) st.
  Proof. intros Θ Φ st H. inversion H. Qed.

  Lemma failure_terminal : forall st, ~ step G D Failure st.
  Proof. intros st H. inversion H. Qed.

  Lemma flat_map_single : forall A (l : list A), flat_map (fun a => [a]) l = l.
  Proof. induction l; simpl; f_equal; auto. Qed.

  Lemma init_first_out : forall n m p t,
    in_frag n m p = true ->
    first_out n m (solutions none_t none_f p t) (init n m p t) (max n m) [].
  Proof.
    intros n m p t Hf.
    assert (Hk : ksols none_t none_f [IMatch p t]
                   (flat_map (fun s => [s]) (solutions none_t none_f p t))).
    { apply (ksols_solutions n m p Hf none_t none_f t [] (fun s => [s])).
      intros. apply K_Nil. }
    rewrite flat_map_single in Hk.
    apply (ksols_behaves n m _ _ _ _ Hk empty empty (max n m) []).
    - split; intros; rewrite ?tsub_root, ?fsub_root, lookup_empty;
        destruct (Nat.ltb _ _); reflexivity.
    - constructor; [exact Hf | constructor].
  Qed.

  (** Which answer: for a pattern of the fragment, [match_pattern]'s
      success is the first element of [solutions] (read through the root's
      scope), and its failure means [solutions] is empty. *)
  Theorem first_solution : forall fuel n m p t,
    in_frag n m p = true ->
    (forall Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ ->
       exists σ ψ L, solutions none_t none_f p t = (σ, ψ) :: L /\
         (forall x, tsub Θ (root_env n m) x = σ x) /\
         (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (match_pattern G D fuel n m p t = OFailure -> solutions none_t none_f p t = []).
  Proof.
    intros fuel n m p t Hf. pose proof (init_first_out n m p t Hf) as H.
    split.
    - intros Θ Φ Hm. apply run_refines_success in Hm.
      destruct (solutions none_t none_f p t) as [|[σ ψ] L]; simpl in H.
      + exfalso. assert (E : Success Θ Φ = Failure)
          by (eapply star_terminal_det; eauto using success_terminal, failure_terminal).
        discriminate.
      + destruct H as (Θ' & Φ' & Hs & [H1 H2]).
        assert (E : Success Θ Φ = Success Θ' Φ')
          by (eapply star_terminal_det; eauto using success_terminal).
        inversion E; subst. exists σ, ψ, L. auto.
    - intros Hm. apply run_refines_failure in Hm.
      destruct (solutions none_t none_f p t) as [|[σ ψ] L]; auto. simpl in H.
      destruct H as (Θ' & Φ' & Hs & _). exfalso.
      assert (E : Failure = Success Θ' Φ')
        by (eapply star_terminal_det; eauto using success_terminal, failure_terminal).
      discriminate.
  Qed.

  (** Conversely, with enough fuel the machine returns the first solution,
      and it answers [OFailure] when there is none. *)
  Theorem first_solution_complete : forall n m p t,
    in_frag n m p = true ->
    (forall σ ψ L, solutions none_t none_f p t = (σ, ψ) :: L ->
       exists fuel Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ /\
         (forall x, tsub Θ (root_env n m) x = σ x) /\
         (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (solutions none_t none_f p t = [] ->
       exists fuel, match_pattern G D fuel n m p t = OFailure).
  Proof.
    intros n m p t Hf. pose proof (init_first_out n m p t Hf) as H. split.
    - intros σ ψ L E. rewrite E in H. simpl in H.
      destruct H as (Θ & Φ & Hs & [H1 H2]).
      destruct (proj1 (run_complete G D _ _ Hs) Θ Φ eq_refl) as [fuel Hr].
      exists fuel, Θ, Φ. auto.
    - intros E. rewrite E in H. simpl in H.
      destruct (proj2 (run_complete G D _ _ H) eq_refl) as [fuel Hr].
      exists fuel. exact Hr.
  Qed.
  (** ** Every solution is a declarative match *)

  Lemma ext_trans : forall A (σ1 σ2 σ3 : nat -> option A), ext σ1 σ2 -> ext σ2 σ3 -> ext σ1 σ3.
  Proof. unfold ext. auto. Qed.

  Lemma ext_upd_none : forall A (σ : nat -> option A) x v, σ x = None -> ext σ (upd σ x v).
  Proof.
    unfold ext, upd. intros A σ x v H y w Hy. destruct (Nat.eqb x y) eqn:E; auto.
    apply Nat.eqb_eq in E. subst. congruence.
  Qed.

  Definition SP (p : pattern) : Prop :=
    forall σ ψ t s, In s (solutions σ ψ p t) ->
      matches G D (fst s) (snd s) p t /\ ext σ (fst s) /\ ext ψ (snd s).

  Lemma solutions_list_sound : forall ps, Forall SP ps ->
    forall σ ψ ts s, In s (solutions_list σ ψ ps ts) ->
      matches_list G D (fst s) (snd s) ps ts /\ ext σ (fst s) /\ ext ψ (snd s).
  Proof.
    induction 1 as [|q ps Hq Hps IH]; intros σ ψ ts s Hs; destruct ts as [|u ts];
      simpl in Hs; try contradiction.
    - destruct Hs as [<-|[]]. simpl. repeat split; try apply ML_Nil; apply ext_refl.
    - apply in_flat_map in Hs. destruct Hs as [s1 [H1 H2]].
      destruct (Hq _ _ _ _ H1) as (M1 & E1 & F1).
      destruct (IH _ _ _ _ H2) as (M2 & E2 & F2).
      repeat split; [|eapply ext_trans; eauto ..].
      apply ML_Cons; auto. eapply match_weakening; eauto.
  Qed.

  Theorem solutions_sound : forall p σ ψ t σ' ψ',
    In (σ', ψ') (solutions σ ψ p t) ->
    matches G D σ' ψ' p t /\ ext σ σ' /\ ext ψ ψ'.
  Proof.
    intros p σ ψ t σ' ψ' H.
    assert (Hp : forall q, SP q).
    { clear. intros p. induction p as [x|f ps Hps|p1 p2 IHp1 IHp2|p g IHp|x p IHp|F p IHp
                     |p p' x IHp1 IHp2|F ps Hps|Q xs Fs] using pattern_ind';
        intros σ0 ψ0 t0 s Hs; simpl in Hs.
      - destruct (σ0 x) as [t'|] eqn:Hx.
        + destruct (Nat.eqb t' t0) eqn:E; [|contradiction].
          apply Nat.eqb_eq in E. subst. destruct Hs as [<-|[]]. simpl.
          repeat split; try apply ext_refl. apply P_Var. exact Hx.
        + destruct Hs as [<-|[]]. simpl. repeat split; try apply ext_refl.
          * apply P_Var. unfold upd. rewrite Nat.eqb_refl. reflexivity.
          * apply ext_upd_none. exact Hx.
      - destruct (Nat.eqb (label G t0) f) eqn:E; [|contradiction].
        apply Nat.eqb_eq in E.
        destruct (solutions_list_sound ps Hps σ0 ψ0 (children G t0) s Hs) as (M & E1 & F1).
        repeat split; auto. apply P_Fun; auto.
      - apply in_app_or in Hs. destruct Hs as [Hs|Hs].
        + destruct (IHp1 _ _ _ _ Hs) as (M & E1 & F1). repeat split; auto.
          apply P_Alt1. exact M.
        + destruct (IHp2 _ _ _ _ Hs) as (M & E1 & F1). repeat split; auto.
          apply P_Alt2. exact M.
      - apply filter_In in Hs. destruct Hs as [Hs Hg].
        destruct (IHp _ _ _ _ Hs) as (M & E1 & F1). repeat split; auto.
        apply P_Guard; auto. unfold guard_ok in Hg.
        destruct (eval_guard G (fst s) (snd s) g) as [[|]|]; congruence.
      - contradiction.
      - contradiction.
      - apply in_flat_map in Hs. destruct Hs as [s1 [H1 H2]].
        destruct (IHp1 _ _ _ _ H1) as (M1 & E1 & F1).
        destruct (fst s1 x) as [t'|] eqn:Hx; [|contradiction].
        destruct (IHp2 _ _ _ _ H2) as (M2 & E2 & F2).
        repeat split; [|eapply ext_trans; eauto ..].
        eapply P_MatchConstr; eauto. eapply match_weakening; eauto.
      - destruct (ψ0 F) as [f|] eqn:HF.
        + destruct (Nat.eqb f (label G t0)) eqn:E; [|contradiction].
          apply Nat.eqb_eq in E. subst.
          destruct (solutions_list_sound ps Hps σ0 ψ0 (children G t0) s Hs) as (M & E1 & F1).
          repeat split; auto. apply P_FunVar; auto.
        + destruct (solutions_list_sound ps Hps σ0 (upd ψ0 F (label G t0)) (children G t0) s Hs)
            as (M & E1 & F1).
          repeat split; auto.
          * apply P_FunVar; auto. apply F1. unfold upd. rewrite Nat.eqb_refl. reflexivity.
          * eapply ext_trans; [apply ext_upd_none; exact HF | exact F1].
      - contradiction. }
    exact (Hp p σ ψ t (σ', ψ') H).
  Qed.
End Priority.

(** ** Which answer the library gives ([match_root], the function behind
    [pypm_match] and every entry of [pypm_match_all]): for a root
    definition whose body is in the fragment, the bindings [m.bindings]
    are the first solution, and "no match" means there is none. *)
Section RootPriority.
  Variable G : graph.
  Variable D : list pdef.

  Theorem match_root_first : forall fuel r t d bs fbs,
    nth_error D r = Some d -> in_frag (nparams d) (nfparams d) (body d) = true ->
    match_root G D fuel r t = RMatch bs fbs ->
    exists σ ψ L, solutions G none_t none_f (body d) t = (σ, ψ) :: L /\
      (forall x, assoc bs x = σ x) /\ (forall F, assoc fbs F = ψ F).
  Proof.
    intros fuel r t d bs fbs Hd Hf H. unfold match_root in H. rewrite Hd in H.
    destruct (rs_mem _ _); [|discriminate].
    destruct (match_pattern G D fuel (nparams d) (nfparams d) (body d) t) as [Θ Φ| |]
      eqn:Hm; simpl in H; try discriminate.
    inversion H; subst.
    destruct (proj1 (first_solution G D fuel _ _ _ t Hf) Θ Φ Hm)
      as (σ & ψ & L & E & H1 & H2).
    exists σ, ψ, L. split; auto. split.
    - intros x. rewrite assoc_project, <- H1. reflexivity.
    - intros F. rewrite assoc_project, <- H2. reflexivity.
  Qed.

  Theorem match_root_none_first : forall fuel r t d,
    nth_error D r = Some d -> in_frag (nparams d) (nfparams d) (body d) = true ->
    match_root G D fuel r t = RNoMatch ->
    solutions G none_t none_f (body d) t = [].
  Proof.
    intros fuel r t d Hd Hf H. unfold match_root in H. rewrite Hd in H.
    destruct (rs_mem (label G t) (ri_find (root_index D) r)) eqn:Hi.
    - destruct (match_pattern G D fuel (nparams d) (nfparams d) (body d) t) eqn:Hm;
        simpl in H; try discriminate.
      exact (proj2 (first_solution G D fuel _ _ _ t Hf) Hm).
    - destruct (solutions G none_t none_f (body d) t) as [|[σ ψ] L] eqn:E; auto.
      exfalso. assert (Hin : In (σ, ψ) (solutions G none_t none_f (body d) t))
        by (rewrite E; left; reflexivity).
      destruct (solutions_sound G D _ _ _ _ _ _ Hin) as [Hm _].
      eapply root_index_no_match; eauto.
  Qed.
End RootPriority.
