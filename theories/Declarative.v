(** * Declarative semantics: [p @ ⟨θ, φ⟩ ≈ t]

    The paper's Figure 16 (all rules). A substitution here is a partial
    function: [σ : var -> option node] for term variables (the paper's θ)
    and [ψ : fvar -> option symbol] for operator variables (the paper's φ).
    The executable matcher keeps finite maps ([Subst.v]); the soundness
    theorems relate the two by [lookup]. *)

From Coq Require Import ZArith List Bool Arith Lia.
From PyPM Require Import Syntax.
Import ListNotations.

Definition tsubst := var -> option node.
Definition fsubst := fvar -> option symbol.

(** [σ ∪ {x ↦ v}], read as an update: a local variable of [∃x.p] shadows
    any [x] outside (P-EXISTS). *)
Definition upd {A} (σ : nat -> option A) (x : nat) (v : A) : nat -> option A :=
  fun y => if Nat.eqb x y then Some v else σ y.

(** The substitution a pattern call [P(x1..xn)] gives to the body of [P]:
    its parameter [i] is the caller's [x_i], nothing else is bound. *)
Definition call_sub {A} (σ : nat -> option A) (xs : list nat) : nat -> option A :=
  fun i => match nth_error xs i with Some x => σ x | None => None end.

(** [θ ⊆ θ'] of Theorem 1. *)
Definition ext {A} (σ σ' : nat -> option A) : Prop :=
  forall x v, σ x = Some v -> σ' x = Some v.

Lemma ext_refl : forall A (σ : nat -> option A), ext σ σ.
Proof. unfold ext. auto. Qed.

Lemma ext_upd : forall A (σ σ' : nat -> option A) x v,
  ext σ σ' -> ext (upd σ x v) (upd σ' x v).
Proof.
  unfold ext, upd. intros A σ σ' x v H y w. destruct (Nat.eqb x y); auto.
Qed.

Lemma ext_call : forall A (σ σ' : nat -> option A) xs,
  ext σ σ' -> ext (call_sub σ xs) (call_sub σ' xs).
Proof.
  unfold ext, call_sub. intros A σ σ' xs H i v. destruct (nth_error xs i); auto.
Qed.

Section Declarative.
  Variable G : graph.
  Variable D : list pdef.

  (** Guard arithmetic is exact and bounded: a sum or difference of
      operands below 2^61 in magnitude, or a product of operands below 2^31,
      is known; any other result is unknown. [in_bound b x] is [|x| < b]
      written without [Z.abs] (see [in_bound_abs]): the extracted code
      computes on 63-bit OCaml integers, and [Values.v] proves that, for
      values in OCaml's range, every intermediate result is in that range,
      so no overflow can make a guard lie. The bounds are literals (no
      [Z.pow] in the extracted code). *)
  Definition in_bound (b : Z) (x : Z) : bool := ((- b <? x) && (x <? b))%Z.
  Definition add_bound : Z := 2305843009213693952%Z.
  Definition mul_bound : Z := 2147483648%Z.

  Lemma add_bound_pow : add_bound = (2 ^ 61)%Z.
  Proof. reflexivity. Qed.

  Lemma mul_bound_pow : mul_bound = (2 ^ 31)%Z.
  Proof. reflexivity. Qed.

  Lemma in_bound_abs : forall b x, in_bound b x = (Z.abs x <? b)%Z.
  Proof.
    intros b x. unfold in_bound.
    destruct (Z.abs x <? b)%Z eqn:E.
    - apply Z.ltb_lt, Z.abs_lt in E. destruct E as [E1 E2].
      apply andb_true_iff. split; apply Z.ltb_lt; assumption.
    - apply Z.ltb_ge in E. apply andb_false_iff.
      destruct (Z.abs_spec x) as [[H1 H2]|[H1 H2]]; rewrite H2 in E.
      + right. apply Z.ltb_ge. assumption.
      + left. apply Z.ltb_ge. lia.
  Qed.

  Definition option_map2 (b : Z) (f : Z -> Z -> Z) (a c : option Z) : option Z :=
    match a, c with
    | Some x, Some y => if in_bound b x && in_bound b y then Some (f x y) else None
    | _, _ => None
    end.
  Definition cmp_map2 (f : Z -> Z -> bool) (a b : option Z) : option bool :=
    match a, b with Some x, Some y => Some (f x y) | _, _ => None end.
  Definition bool_map2 (f : bool -> bool -> bool) (a b : option bool) :=
    match a, b with Some x, Some y => Some (f x y) | _, _ => None end.

  (** Figure 8's ⟦e[θ]⟧: [x.α] reads attribute α of the node σ(x), [F.α]
      attribute α of the operator ψ(F). [None] (unknown) if a variable is
      unbound or an attribute missing. *)
  Fixpoint eval_expr (σ : tsubst) (ψ : fsubst) (e : expr) : option Z :=
    match e with
    | EConst z => Some z
    | EAttr x a => match σ x with Some t => attr G a t | None => None end
    | EFAttr F a => match ψ F with Some f => sym_attr G a f | None => None end
    | EAdd e1 e2 => option_map2 add_bound Z.add (eval_expr σ ψ e1) (eval_expr σ ψ e2)
    | ESub e1 e2 => option_map2 add_bound Z.sub (eval_expr σ ψ e1) (eval_expr σ ψ e2)
    | EMul e1 e2 => option_map2 mul_bound Z.mul (eval_expr σ ψ e1) (eval_expr σ ψ e2)
    end.

  (** Figure 8's ⟦g[θ]⟧, three-valued and strict: unknown operands make the
      whole guard unknown, and only [Some true] lets a guard pass. *)
  Fixpoint eval_guard (σ : tsubst) (ψ : fsubst) (g : guard) : option bool :=
    match g with
    | GTrue => Some true
    | GEq e1 e2 => cmp_map2 Z.eqb (eval_expr σ ψ e1) (eval_expr σ ψ e2)
    | GLt e1 e2 => cmp_map2 Z.ltb (eval_expr σ ψ e1) (eval_expr σ ψ e2)
    | GAnd g1 g2 => bool_map2 andb (eval_guard σ ψ g1) (eval_guard σ ψ g2)
    | GOr g1 g2 => bool_map2 orb (eval_guard σ ψ g1) (eval_guard σ ψ g2)
    | GNot g => option_map negb (eval_guard σ ψ g)
    end.

  (** Figure 16. [matches_list] is the premise "∀i. p_i @ ⟨θ, φ⟩ ≈ t_i". *)
  Inductive matches : tsubst -> fsubst -> pattern -> node -> Prop :=
  | P_Var : forall σ ψ x t,                                    (* P-VAR *)
      σ x = Some t ->
      matches σ ψ (PVar x) t
  | P_Fun : forall σ ψ f ps t,                                 (* P-FUN *)
      label G t = f ->
      matches_list σ ψ ps (children G t) ->
      matches σ ψ (PApp f ps) t
  | P_Alt1 : forall σ ψ p1 p2 t,                               (* P-ALT-1 *)
      matches σ ψ p1 t -> matches σ ψ (PAlt p1 p2) t
  | P_Alt2 : forall σ ψ p1 p2 t,                               (* P-ALT-2 *)
      matches σ ψ p2 t -> matches σ ψ (PAlt p1 p2) t
  | P_Guard : forall σ ψ p g t,                                (* P-GUARD *)
      matches σ ψ p t -> eval_guard σ ψ g = Some true ->
      matches σ ψ (PGuard p g) t
  | P_Exists : forall σ ψ x p t t',                            (* P-EXISTS *)
      matches (upd σ x t') ψ p t ->
      matches σ ψ (PExists x p) t
  | P_ExistsF : forall σ ψ F p t f,                            (* ∃F.p: P-EXISTS for φ *)
      matches σ (upd ψ F f) p t ->
      matches σ ψ (PExistsF F p) t
  | P_MatchConstr : forall σ ψ p p' x t t',                    (* P-MATCHCONSTR *)
      matches σ ψ p t -> σ x = Some t' -> matches σ ψ p' t' ->
      matches σ ψ (PConstr p p' x) t
  | P_FunVar : forall σ ψ F ps t,                              (* P-FUN-VAR *)
      ψ F = Some (label G t) ->
      matches_list σ ψ ps (children G t) ->
      matches σ ψ (PFunVar F ps) t
  | P_Mu : forall σ ψ P xs Fs d t,                             (* P-MU *)
      nth_error D P = Some d ->
      length xs = nparams d -> length Fs = nfparams d ->
      matches (call_sub σ xs) (call_sub ψ Fs) (body d) t ->
      matches σ ψ (PCall P xs Fs) t
  with matches_list : tsubst -> fsubst -> list pattern -> list node -> Prop :=
  | ML_Nil : forall σ ψ, matches_list σ ψ [] []
  | ML_Cons : forall σ ψ p ps t ts,
      matches σ ψ p t -> matches_list σ ψ ps ts ->
      matches_list σ ψ (p :: ps) (t :: ts).

  Scheme matches_mut := Induction for matches Sort Prop
  with matches_list_mut := Induction for matches_list Sort Prop.

  (** ** Guards are monotone in the substitutions *)

  Lemma eval_expr_mono : forall σ σ' ψ ψ' e v,
    ext σ σ' -> ext ψ ψ' -> eval_expr σ ψ e = Some v -> eval_expr σ' ψ' e = Some v.
  Proof.
    intros σ σ' ψ ψ' e.
    induction e as [z|x a|F a|e1 IH1 e2 IH2|e1 IH1 e2 IH2|e1 IH1 e2 IH2];
      intros v Hs Hf H; simpl in *.
    - exact H.
    - destruct (σ x) eqn:Hx; [|discriminate]. rewrite (Hs _ _ Hx). exact H.
    - destruct (ψ F) eqn:Hx; [|discriminate]. rewrite (Hf _ _ Hx). exact H.
    - unfold option_map2 in *.
      destruct (eval_expr σ ψ e1) eqn:E1; destruct (eval_expr σ ψ e2) eqn:E2;
        try discriminate.
      rewrite (IH1 _ Hs Hf eq_refl), (IH2 _ Hs Hf eq_refl). exact H.
    - unfold option_map2 in *.
      destruct (eval_expr σ ψ e1) eqn:E1; destruct (eval_expr σ ψ e2) eqn:E2;
        try discriminate.
      rewrite (IH1 _ Hs Hf eq_refl), (IH2 _ Hs Hf eq_refl). exact H.
    - unfold option_map2 in *.
      destruct (eval_expr σ ψ e1) eqn:E1; destruct (eval_expr σ ψ e2) eqn:E2;
        try discriminate.
      rewrite (IH1 _ Hs Hf eq_refl), (IH2 _ Hs Hf eq_refl). exact H.
  Qed.

  Lemma eval_guard_mono : forall σ σ' ψ ψ' g b,
    ext σ σ' -> ext ψ ψ' -> eval_guard σ ψ g = Some b -> eval_guard σ' ψ' g = Some b.
  Proof.
    intros σ σ' ψ ψ' g.
    induction g as [|e1 e2|e1 e2|g1 IH1 g2 IH2|g1 IH1 g2 IH2|g IH];
      intros b Hs Hf H; simpl in *.
    - exact H.
    - unfold cmp_map2 in *.
      destruct (eval_expr σ ψ e1) eqn:E1; destruct (eval_expr σ ψ e2) eqn:E2;
        try discriminate.
      rewrite (eval_expr_mono _ _ _ _ _ _ Hs Hf E1), (eval_expr_mono _ _ _ _ _ _ Hs Hf E2).
      exact H.
    - unfold cmp_map2 in *.
      destruct (eval_expr σ ψ e1) eqn:E1; destruct (eval_expr σ ψ e2) eqn:E2;
        try discriminate.
      rewrite (eval_expr_mono _ _ _ _ _ _ Hs Hf E1), (eval_expr_mono _ _ _ _ _ _ Hs Hf E2).
      exact H.
    - unfold bool_map2 in *.
      destruct (eval_guard σ ψ g1) eqn:E1; destruct (eval_guard σ ψ g2) eqn:E2;
        try discriminate.
      rewrite (IH1 _ Hs Hf eq_refl), (IH2 _ Hs Hf eq_refl). exact H.
    - unfold bool_map2 in *.
      destruct (eval_guard σ ψ g1) eqn:E1; destruct (eval_guard σ ψ g2) eqn:E2;
        try discriminate.
      rewrite (IH1 _ Hs Hf eq_refl), (IH2 _ Hs Hf eq_refl). exact H.
    - destruct (eval_guard σ ψ g) eqn:E; try discriminate.
      rewrite (IH _ Hs Hf eq_refl). exact H.
  Qed.

  (** When every variable a guard reads is bound, growing the substitutions
      does not change its value. *)
  Lemma eval_expr_stable : forall σ σ' ψ ψ' e,
    (forall x, In x (expr_vars e) -> σ x <> None) ->
    (forall F, In F (expr_fvars e) -> ψ F <> None) ->
    ext σ σ' -> ext ψ ψ' -> eval_expr σ' ψ' e = eval_expr σ ψ e.
  Proof.
    intros σ σ' ψ ψ' e.
    induction e as [z|x a|F a|e1 IH1 e2 IH2|e1 IH1 e2 IH2|e1 IH1 e2 IH2];
      intros Hb Hbf Hs Hf; simpl in *.
    - reflexivity.
    - specialize (Hb x (or_introl eq_refl)).
      destruct (σ x) eqn:Hx; [|congruence]. rewrite (Hs _ _ Hx). reflexivity.
    - specialize (Hbf F (or_introl eq_refl)).
      destruct (ψ F) eqn:Hx; [|congruence]. rewrite (Hf _ _ Hx). reflexivity.
    - rewrite IH1, IH2; auto; intros y Hy;
        first [apply Hb | apply Hbf]; apply in_or_app; auto.
    - rewrite IH1, IH2; auto; intros y Hy;
        first [apply Hb | apply Hbf]; apply in_or_app; auto.
    - rewrite IH1, IH2; auto; intros y Hy;
        first [apply Hb | apply Hbf]; apply in_or_app; auto.
  Qed.

  Lemma eval_guard_stable : forall σ σ' ψ ψ' g,
    (forall x, In x (guard_vars g) -> σ x <> None) ->
    (forall F, In F (guard_fvars g) -> ψ F <> None) ->
    ext σ σ' -> ext ψ ψ' -> eval_guard σ' ψ' g = eval_guard σ ψ g.
  Proof.
    intros σ σ' ψ ψ' g.
    induction g as [|e1 e2|e1 e2|g1 IH1 g2 IH2|g1 IH1 g2 IH2|g IH];
      intros Hb Hbf Hs Hf; simpl in *.
    - reflexivity.
    - rewrite !(eval_expr_stable σ σ' ψ ψ'); auto;
        intros y Hy; first [apply Hb | apply Hbf]; apply in_or_app; auto.
    - rewrite !(eval_expr_stable σ σ' ψ ψ'); auto;
        intros y Hy; first [apply Hb | apply Hbf]; apply in_or_app; auto.
    - rewrite IH1, IH2; auto;
        intros y Hy; first [apply Hb | apply Hbf]; apply in_or_app; auto.
    - rewrite IH1, IH2; auto;
        intros y Hy; first [apply Hb | apply Hbf]; apply in_or_app; auto.
    - rewrite IH; auto.
  Qed.

  (** ** Theorem 1 (Match Weakening): [p @ ⟨θ, φ⟩ ≈ t], [θ ⊆ θ'] and
      [φ ⊆ φ'] give [p @ ⟨θ', φ'⟩ ≈ t]. *)
  Theorem match_weakening : forall σ ψ p t σ' ψ',
    matches σ ψ p t -> ext σ σ' -> ext ψ ψ' -> matches σ' ψ' p t.
  Proof.
    intros σ0 ψ0 p0 t0 σ' ψ' H. revert σ' ψ'.
    induction H as
      [ ? ? x t Hx                           (* P-VAR *)
      | ? ? f ps t Hlabel Hps IHps           (* P-FUN *)
      | ? ? p1 p2 t Hm IH                    (* P-ALT-1 *)
      | ? ? p1 p2 t Hm IH                    (* P-ALT-2 *)
      | ? ? p g t Hm IH Hg                   (* P-GUARD *)
      | ? ? x p t t' Hm IH                   (* P-EXISTS *)
      | ? ? F p t f Hm IH                    (* ∃F *)
      | ? ? p p' x t t' Hm IH Hx Hm' IH'     (* P-MATCHCONSTR *)
      | ? ? F ps t HF Hps IHps               (* P-FUN-VAR *)
      | ? ? P xs Fs d t HP Hxs HFs Hm IH     (* P-MU *)
      | ? ?                                  (* [] *)
      | ? ? p ps t ts Hm IH Hms IHms ]       (* p :: ps *)
      using matches_mut with
      (P0 := fun σ ψ ps ts _ => forall σ' ψ', ext σ σ' -> ext ψ ψ' ->
                                matches_list σ' ψ' ps ts);
      intros σ2 ψ2 Hs Hf.
    - apply P_Var. apply Hs. exact Hx.
    - apply P_Fun; [exact Hlabel | apply IHps; assumption].
    - apply P_Alt1. apply IH; assumption.
    - apply P_Alt2. apply IH; assumption.
    - apply P_Guard; [apply IH; assumption | eapply eval_guard_mono; [exact Hs | exact Hf | exact Hg]].
    - eapply P_Exists. apply IH; [apply ext_upd; exact Hs | exact Hf].
    - eapply P_ExistsF. apply IH; [exact Hs | apply ext_upd; exact Hf].
    - eapply P_MatchConstr; [apply IH; assumption | apply Hs; exact Hx | apply IH'; assumption].
    - apply P_FunVar; [apply Hf; exact HF | apply IHps; assumption].
    - eapply P_Mu; [exact HP | exact Hxs | exact HFs |]. apply IH; apply ext_call; assumption.
    - apply ML_Nil.
    - apply ML_Cons; [apply IH | apply IHms]; assumption.
  Qed.

  (** Matching only depends on the values of the substitutions. *)
  Corollary matches_ext : forall σ ψ σ' ψ' p t,
    (forall x, σ x = σ' x) -> (forall F, ψ F = ψ' F) ->
    matches σ ψ p t -> matches σ' ψ' p t.
  Proof.
    intros σ ψ σ' ψ' p t Hs Hf H. eapply match_weakening; eauto.
    - intros x v Hx. rewrite <- Hs. exact Hx.
    - intros x v Hx. rewrite <- Hf. exact Hx.
  Qed.

  (** Every successful match binds the variables of [binds p] / [fbinds p]. *)
  Lemma matches_binds : wf_defs D = true -> forall σ ψ p t,
    matches σ ψ p t ->
    (forall x, In x (binds D p) -> σ x <> None) /\
    (forall F, In F (fbinds D p) -> ψ F <> None).
  Proof.
    intros Hd σ0 ψ0 p0 t0 H.
    induction H as
      [ ? ? x t Hx                           (* P-VAR *)
      | ? ? f ps t Hlabel Hps IHps           (* P-FUN *)
      | ? ? p1 p2 t Hm IH                    (* P-ALT-1 *)
      | ? ? p1 p2 t Hm IH                    (* P-ALT-2 *)
      | ? ? p g t Hm IH Hg                   (* P-GUARD *)
      | ? ? x p t t' Hm IH                   (* P-EXISTS *)
      | ? ? F p t f Hm IH                    (* ∃F *)
      | ? ? p p' x t t' Hm IH Hx Hm' IH'     (* P-MATCHCONSTR *)
      | ? ? F ps t HF Hps IHps               (* P-FUN-VAR *)
      | ? ? P xs Fs d t HP Hxs HFs Hm IH     (* P-MU *)
      | ? ?                                  (* [] *)
      | ? ? p ps t ts Hm IH Hms IHms ]       (* p :: ps *)
      using matches_mut with
      (P0 := fun σ ψ ps ts _ =>
         (forall x, In x (flat_map (binds D) ps) -> σ x <> None) /\
         (forall F, In F (flat_map (fbinds D) ps) -> ψ F <> None));
      simpl in *.
    - split; [intros y [<-|[]]; congruence | intros _ []].
    - exact IHps.
    - destruct IH as [IH1 IH2]. split; intros y Hy;
        apply In_inter in Hy; destruct Hy as [Hy1 Hy2]; auto.
    - destruct IH as [IH1 IH2]. split; intros y Hy;
        apply In_inter in Hy; destruct Hy as [Hy1 Hy2]; auto.
    - exact IH.
    - destruct IH as [IH1 IH2]. split.
      + intros y Hy. apply In_remove_var in Hy. destruct Hy as [Hy Hne].
        specialize (IH1 y Hy). unfold upd in IH1.
        apply Nat.eqb_neq in Hne. rewrite Hne in IH1. exact IH1.
      + exact IH2.
    - destruct IH as [IH1 IH2]. split.
      + exact IH1.
      + intros y Hy. apply In_remove_var in Hy. destruct Hy as [Hy Hne].
        specialize (IH2 y Hy). unfold upd in IH2.
        apply Nat.eqb_neq in Hne. rewrite Hne in IH2. exact IH2.
    - destruct IH as [IH1 IH2]. destruct IH' as [IH3 IH4].
      split; intros y Hy; apply in_app_or in Hy; destruct Hy as [Hy|Hy]; auto.
    - destruct IHps as [IH1 IH2]. split; [exact IH1|].
      intros y [<-|Hy]; [congruence | auto].
    - rewrite HP. destruct IH as [IH1 IH2].
      unfold wf_defs in Hd. rewrite forallb_forall in Hd.
      assert (Hwd : wf_def D d = true) by (apply Hd; eapply nth_error_In; exact HP).
      unfold wf_def in Hwd. apply andb_true_iff in Hwd. destruct Hwd as [Hwd _].
      apply andb_true_iff in Hwd. destruct Hwd as [Hwd Hf].
      apply andb_true_iff in Hwd. destruct Hwd as [_ Hb].
      split.
      + intros y Hy. apply In_args_of in Hy. destruct Hy as [i [Hi Hn]].
        specialize (IH1 i (subset_In _ _ Hb i Hi)). unfold call_sub in IH1.
        rewrite Hn in IH1. exact IH1.
      + intros y Hy. apply In_args_of in Hy. destruct Hy as [i [Hi Hn]].
        specialize (IH2 i (subset_In _ _ Hf i Hi)). unfold call_sub in IH2.
        rewrite Hn in IH2. exact IH2.
    - split; intros _ [].
    - destruct IH as [IH1 IH2]. destruct IHms as [IH3 IH4].
      split; intros y Hy; apply in_app_or in Hy; destruct Hy as [Hy|Hy]; auto.
  Qed.
  (** ** Scope: a match needs only the variables in scope *)

  (** [σ] restricted to the variables [sv] admits. *)
  Definition restrict {A} (sv : nat -> bool) (σ : nat -> option A) : nat -> option A :=
    fun x => if sv x then σ x else None.

  Lemma eval_expr_agree : forall σ σ' ψ ψ' e,
    (forall x, In x (expr_vars e) -> σ x = σ' x) ->
    (forall F, In F (expr_fvars e) -> ψ F = ψ' F) ->
    eval_expr σ ψ e = eval_expr σ' ψ' e.
  Proof.
    intros σ σ' ψ ψ' e.
    induction e as [z|x a|F a|e1 IH1 e2 IH2|e1 IH1 e2 IH2|e1 IH1 e2 IH2];
      intros Hs Hf; simpl in *.
    - reflexivity.
    - rewrite (Hs x (or_introl eq_refl)). reflexivity.
    - rewrite (Hf F (or_introl eq_refl)). reflexivity.
    - rewrite IH1, IH2; auto; intros y Hy; first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IH1, IH2; auto; intros y Hy; first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IH1, IH2; auto; intros y Hy; first [apply Hs | apply Hf]; apply in_or_app; auto.
  Qed.

  Lemma eval_guard_agree : forall σ σ' ψ ψ' g,
    (forall x, In x (guard_vars g) -> σ x = σ' x) ->
    (forall F, In F (guard_fvars g) -> ψ F = ψ' F) ->
    eval_guard σ ψ g = eval_guard σ' ψ' g.
  Proof.
    intros σ σ' ψ ψ' g.
    induction g as [|e1 e2|e1 e2|g1 IH1 g2 IH2|g1 IH1 g2 IH2|g IH]; intros Hs Hf; simpl in *.
    - reflexivity.
    - rewrite !(eval_expr_agree σ σ' ψ ψ'); auto;
        intros y Hy; first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite !(eval_expr_agree σ σ' ψ ψ'); auto;
        intros y Hy; first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IH1, IH2; auto; intros y Hy; first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IH1, IH2; auto; intros y Hy; first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IH; auto.
  Qed.

  (** A scoped pattern matches under its substitutions restricted to the
      variables in scope: the others are never read. *)
  Lemma matches_restrict : forall σ ψ p t,
    matches σ ψ p t -> forall sv sf, scoped sv sf p = true ->
    matches (restrict sv σ) (restrict sf ψ) p t.
  Proof.
    intros σ0 ψ0 p0 t0 H.
    induction H as
      [ ? ? x t Hx
      | ? ? f ps t Hlabel Hps IHps
      | ? ? p1 p2 t Hm IH
      | ? ? p1 p2 t Hm IH
      | ? ? p g t Hm IH Hg
      | ? ? x p t t' Hm IH
      | ? ? F p t f Hm IH
      | ? ? p p' x t t' Hm IH Hx Hm' IH'
      | ? ? F ps t HF Hps IHps
      | ? ? P xs Fs d t HP Hxs HFs Hm IH
      | ? ?
      | ? ? p ps t ts Hm IH Hms IHms ]
      using matches_mut with
      (P0 := fun σ ψ ps ts _ => forall sv sf, forallb (scoped sv sf) ps = true ->
               matches_list (restrict sv σ) (restrict sf ψ) ps ts);
      intros sv sf Hsc; simpl in Hsc; unfold restrict.
    - apply P_Var. unfold restrict. rewrite Hsc. exact Hx.
    - apply P_Fun; [exact Hlabel | apply IHps; exact Hsc].
    - apply andb_true_iff in Hsc. apply P_Alt1. apply IH. apply Hsc.
    - apply andb_true_iff in Hsc. apply P_Alt2. apply IH. apply Hsc.
    - apply andb_true_iff in Hsc. destruct Hsc as [Hsc Hgf].
      apply andb_true_iff in Hsc. destruct Hsc as [Hsc Hgv].
      rewrite forallb_forall in Hgv, Hgf.
      apply P_Guard; [apply IH; exact Hsc|]. rewrite <- Hg. apply eval_guard_agree.
      + intros y Hy. unfold restrict. rewrite (Hgv y Hy). reflexivity.
      + intros y Hy. unfold restrict. rewrite (Hgf y Hy). reflexivity.
    - apply P_Exists with (t' := t'). specialize (IH _ _ Hsc).
      eapply matches_ext; [| | exact IH]; intros y; unfold restrict, upd;
        [|reflexivity].
      destruct (Nat.eqb x y) eqn:E.
      + apply Nat.eqb_eq in E. subst. rewrite Nat.eqb_refl. reflexivity.
      + rewrite Nat.eqb_sym, E. reflexivity.
    - apply P_ExistsF with (f := f). specialize (IH _ _ Hsc).
      eapply matches_ext; [| | exact IH]; intros y; unfold restrict, upd;
        [reflexivity|].
      destruct (Nat.eqb F y) eqn:E.
      + apply Nat.eqb_eq in E. subst. rewrite Nat.eqb_refl. reflexivity.
      + rewrite Nat.eqb_sym, E. reflexivity.
    - apply andb_true_iff in Hsc. destruct Hsc as [Hsc Hsx].
      apply andb_true_iff in Hsc. destruct Hsc as [Hsc Hsc'].
      eapply P_MatchConstr; [apply IH; exact Hsc | | apply IH'; exact Hsc'].
      unfold restrict. rewrite Hsx. exact Hx.
    - apply andb_true_iff in Hsc. destruct Hsc as [HsF Hsc].
      apply P_FunVar; [unfold restrict; rewrite HsF; exact HF | apply IHps; exact Hsc].
    - apply andb_true_iff in Hsc. destruct Hsc as [Hsx HsF].
      rewrite forallb_forall in Hsx, HsF.
      eapply P_Mu; [exact HP | exact Hxs | exact HFs |].
      eapply matches_ext; [| | exact Hm]; intros i; unfold call_sub, restrict;
        destruct (nth_error _ i) eqn:E; try reflexivity;
        [rewrite (Hsx _ (nth_error_In _ _ E)) | rewrite (HsF _ (nth_error_In _ _ E))];
        reflexivity.
    - apply ML_Nil.
    - apply andb_true_iff in Hsc. destruct Hsc as [Hsc Hscs].
      apply ML_Cons; [apply IH | apply IHms]; assumption.
  Qed.

  (** The body of a definition of a well-formed table matches under its
      substitutions restricted to the parameters. *)
  Corollary matches_params : wf_defs D = true -> forall P d σ ψ t,
    nth_error D P = Some d -> matches σ ψ (body d) t ->
    matches (restrict (fun x => Nat.ltb x (nparams d)) σ)
            (restrict (fun F => Nat.ltb F (nfparams d)) ψ) (body d) t.
  Proof.
    intros Hd P d σ ψ t HP Hm. apply matches_restrict; [exact Hm|].
    unfold wf_defs in Hd. rewrite forallb_forall in Hd.
    assert (Hw : wf_def D d = true) by (apply Hd; eapply nth_error_In; exact HP).
    unfold wf_def in Hw. apply andb_true_iff in Hw. apply Hw.
  Qed.

  Lemma restrict_below : forall A (σ : nat -> option A) n x,
    n <= x -> restrict (fun y => Nat.ltb y n) σ x = None.
  Proof.
    intros A σ n x H. unfold restrict. destruct (Nat.ltb x n) eqn:E; [|reflexivity].
    apply Nat.ltb_lt in E. lia.
  Qed.
End Declarative.
