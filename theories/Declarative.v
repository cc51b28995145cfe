(** * Declarative semantics: [p @ θ ≈ t]

    The paper's Figure 6 (basic patterns) and Figure 8 (guards): a
    nondeterministic proof system saying which terms match which patterns
    under which substitution. *)

From Coq Require Import ZArith List Bool.
From PyPM Require Import Syntax Subst.
Import ListNotations.

Section Declarative.
  Variable G : graph.

  (** Figure 8's ⟦e[θ]⟧: [x.α] reads attribute α of the node θ(x). The
      result is [None] (unknown) if [x] is unbound or the attribute missing. *)
  Definition option_map2 (f : Z -> Z -> Z) (a b : option Z) : option Z :=
    match a, b with Some x, Some y => Some (f x y) | _, _ => None end.

  Fixpoint eval_expr (θ : subst) (e : expr) : option Z :=
    match e with
    | EConst z => Some z
    | EAttr x a =>
        match lookup x θ with
        | Some t => attr G a t
        | None => None
        end
    | EAdd e1 e2 => option_map2 Z.add (eval_expr θ e1) (eval_expr θ e2)
    | ESub e1 e2 => option_map2 Z.sub (eval_expr θ e1) (eval_expr θ e2)
    | EMul e1 e2 => option_map2 Z.mul (eval_expr θ e1) (eval_expr θ e2)
    end.

  Definition bool_map2 (f : bool -> bool -> bool) (a b : option bool) :=
    match a, b with Some x, Some y => Some (f x y) | _, _ => None end.
  Definition cmp_map2 (f : Z -> Z -> bool) (a b : option Z) :=
    match a, b with Some x, Some y => Some (f x y) | _, _ => None end.

  (** Figure 8's ⟦g[θ]⟧, three-valued and strict: unknown operands make the
      whole guard unknown, and only [Some true] lets a guard pass. *)
  Fixpoint eval_guard (θ : subst) (g : guard) : option bool :=
    match g with
    | GTrue => Some true
    | GEq e1 e2 => cmp_map2 Z.eqb (eval_expr θ e1) (eval_expr θ e2)
    | GLt e1 e2 => cmp_map2 Z.ltb (eval_expr θ e1) (eval_expr θ e2)
    | GAnd g1 g2 => bool_map2 andb (eval_guard θ g1) (eval_guard θ g2)
    | GOr g1 g2 => bool_map2 orb (eval_guard θ g1) (eval_guard θ g2)
    | GNot g => option_map negb (eval_guard θ g)
    end.

  Definition guard_holds (θ : subst) (g : guard) : Prop :=
    eval_guard θ g = Some true.

  (** Figures 6 and 8. [matches_list] is P-FUN's premise "∀i. p_i @ θ ≈ t_i". *)
  Inductive matches : pattern -> subst -> node -> Prop :=
  | P_Var : forall x θ t,                                  (* P-VAR *)
      lookup x θ = Some t ->
      matches (PVar x) θ t
  | P_Fun : forall f ps θ t,                               (* P-FUN *)
      label G t = f ->
      matches_list ps θ (children G t) ->
      matches (PApp f ps) θ t
  | P_Alt1 : forall p1 p2 θ t,                             (* P-ALT-1 *)
      matches p1 θ t -> matches (PAlt p1 p2) θ t
  | P_Alt2 : forall p1 p2 θ t,                             (* P-ALT-2 *)
      matches p2 θ t -> matches (PAlt p1 p2) θ t
  | P_Guard : forall p g θ t,                              (* P-GUARD *)
      matches p θ t -> guard_holds θ g ->
      matches (PGuard p g) θ t
  with matches_list : list pattern -> subst -> list node -> Prop :=
  | ML_Nil : forall θ, matches_list [] θ []
  | ML_Cons : forall p ps θ t ts,
      matches p θ t -> matches_list ps θ ts ->
      matches_list (p :: ps) θ (t :: ts).

  Scheme matches_mut := Induction for matches Sort Prop
  with matches_list_mut := Induction for matches_list Sort Prop.

  (** ** Guards are monotone in θ *)

  Lemma eval_expr_mono : forall θ θ' e z,
    sub θ θ' -> eval_expr θ e = Some z -> eval_expr θ' e = Some z.
  Proof.
    intros θ θ' e. induction e; intros v Hs H; simpl in *; auto.
    - destruct (lookup x θ) eqn:Hx; [|discriminate].
      rewrite (Hs _ _ Hx). exact H.
    - destruct (eval_expr θ e1) eqn:E1; destruct (eval_expr θ e2) eqn:E2;
        simpl in H; try discriminate.
      rewrite (IHe1 _ Hs eq_refl), (IHe2 _ Hs eq_refl). exact H.
    - destruct (eval_expr θ e1) eqn:E1; destruct (eval_expr θ e2) eqn:E2;
        simpl in H; try discriminate.
      rewrite (IHe1 _ Hs eq_refl), (IHe2 _ Hs eq_refl). exact H.
    - destruct (eval_expr θ e1) eqn:E1; destruct (eval_expr θ e2) eqn:E2;
        simpl in H; try discriminate.
      rewrite (IHe1 _ Hs eq_refl), (IHe2 _ Hs eq_refl). exact H.
  Qed.

  Lemma eval_guard_mono : forall θ θ' g b,
    sub θ θ' -> eval_guard θ g = Some b -> eval_guard θ' g = Some b.
  Proof.
    intros θ θ' g. induction g; intros b Hs H; simpl in *; auto.
    - unfold cmp_map2 in *.
      destruct (eval_expr θ e1) eqn:E1; destruct (eval_expr θ e2) eqn:E2;
        try discriminate.
      rewrite (eval_expr_mono _ _ _ _ Hs E1), (eval_expr_mono _ _ _ _ Hs E2).
      exact H.
    - unfold cmp_map2 in *.
      destruct (eval_expr θ e1) eqn:E1; destruct (eval_expr θ e2) eqn:E2;
        try discriminate.
      rewrite (eval_expr_mono _ _ _ _ Hs E1), (eval_expr_mono _ _ _ _ Hs E2).
      exact H.
    - unfold bool_map2 in *.
      destruct (eval_guard θ g1) eqn:E1; destruct (eval_guard θ g2) eqn:E2;
        try discriminate.
      rewrite (IHg1 _ Hs eq_refl), (IHg2 _ Hs eq_refl). exact H.
    - unfold bool_map2 in *.
      destruct (eval_guard θ g1) eqn:E1; destruct (eval_guard θ g2) eqn:E2;
        try discriminate.
      rewrite (IHg1 _ Hs eq_refl), (IHg2 _ Hs eq_refl). exact H.
    - destruct (eval_guard θ g) eqn:E; try discriminate.
      rewrite (IHg _ Hs eq_refl). exact H.
  Qed.

  (** When every variable of [e] is bound in θ, extending θ changes nothing. *)
  Lemma eval_expr_stable : forall θ θ' e,
    (forall x, In x (expr_vars e) -> bound θ x) -> sub θ θ' ->
    eval_expr θ' e = eval_expr θ e.
  Proof.
    intros θ θ' e. induction e; intros Hb Hs; simpl in *; auto.
    - specialize (Hb x (or_introl eq_refl)). unfold bound in Hb.
      destruct (lookup x θ) eqn:Hx; [|congruence].
      rewrite (Hs _ _ Hx). reflexivity.
    - rewrite IHe1, IHe2; auto; intros y Hy; apply Hb; apply in_or_app; auto.
    - rewrite IHe1, IHe2; auto; intros y Hy; apply Hb; apply in_or_app; auto.
    - rewrite IHe1, IHe2; auto; intros y Hy; apply Hb; apply in_or_app; auto.
  Qed.

  Lemma eval_guard_stable : forall θ θ' g,
    (forall x, In x (guard_vars g) -> bound θ x) -> sub θ θ' ->
    eval_guard θ' g = eval_guard θ g.
  Proof.
    intros θ θ' g. induction g; intros Hb Hs; simpl in *; auto.
    - rewrite !(eval_expr_stable θ θ'); auto;
        intros y Hy; apply Hb; apply in_or_app; auto.
    - rewrite !(eval_expr_stable θ θ'); auto;
        intros y Hy; apply Hb; apply in_or_app; auto.
    - rewrite IHg1, IHg2; auto; intros y Hy; apply Hb; apply in_or_app; auto.
    - rewrite IHg1, IHg2; auto; intros y Hy; apply Hb; apply in_or_app; auto.
    - rewrite IHg; auto.
  Qed.

  (** ** Theorem 1 (Match Weakening): [p @ θ ≈ t] and [θ ⊆ θ'] give
      [p @ θ' ≈ t]. *)
  Theorem match_weakening : forall p θ t θ',
    matches p θ t -> sub θ θ' -> matches p θ' t.
  Proof.
    intros p θ t θ' H.
    induction H using matches_mut with
      (P0 := fun ps θ ts _ => sub θ θ' -> matches_list ps θ' ts);
      intros Hs.
    - apply P_Var. apply Hs. assumption.
    - apply P_Fun; auto.
    - apply P_Alt1; auto.
    - apply P_Alt2; auto.
    - apply P_Guard; auto. eapply eval_guard_mono; eauto.
    - apply ML_Nil.
    - apply ML_Cons; auto.
  Qed.

  (** Every successful match binds the variables of [binds p]. *)
  Lemma matches_binds : forall p θ t,
    matches p θ t -> forall x, In x (binds p) -> bound θ x.
  Proof.
    intros p θ t H.
    induction H using matches_mut with
      (P0 := fun ps θ ts _ => forall x, In x (flat_map binds ps) -> bound θ x);
      intros y Hy; simpl in *.
    - destruct Hy as [<-|[]]. unfold bound. congruence.
    - auto.
    - apply In_binds_alt in Hy. destruct Hy. auto.
    - apply In_binds_alt in Hy. destruct Hy. auto.
    - auto.
    - destruct Hy.
    - apply in_app_or in Hy. destruct Hy; auto.
  Qed.
End Declarative.

Notation "p @ θ ≈ t 'in' G" := (matches G p θ t) (at level 70).
