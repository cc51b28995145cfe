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
    since every slot the state mentions is below [nf] ([inv_fresh]), the rest
    of the state cannot see the difference. [wfk] carries well-formedness:
    guards, [checkName] and [matchConstr] only read slots that are bound by
    the time they run. *)

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
    unfold tsub, gsub. intros. destruct (vfind x (tenv ρ)); eauto. discriminate.
  Qed.

  Lemma fsub_var : forall Φ ρ F f,
    fsub Φ ρ F = Some f -> exists s, vfind F (fenv ρ) = Some s /\ lookup s Φ = Some f.
  Proof.
    unfold fsub, gsub. intros. destruct (vfind F (fenv ρ)); eauto. discriminate.
  Qed.

  Lemma Forall_push : forall Θ Φ ps ts ρ k,
    matches_list G D (tsub Θ ρ) (fsub Φ ρ) ps ts -> Forall (holds Θ Φ) k ->
    Forall (holds Θ Φ) (push_matches ps ts ρ k).
  Proof.
    intros Θ Φ ps. induction ps as [|p ps IH]; intros ts ρ k H Hk;
      inversion H; subst; simpl; auto.
  Qed.

  Lemma Forall_push_inv : forall Θ Φ ps ts ρ k,
    length ps = length ts -> Forall (holds Θ Φ) (push_matches ps ts ρ k) ->
    matches_list G D (tsub Θ ρ) (fsub Φ ρ) ps ts /\ Forall (holds Θ Φ) k.
  Proof.
    intros Θ Φ ps. induction ps as [|p ps IH]; intros ts ρ k Hl H;
      destruct ts as [|t ts]; simpl in *; try discriminate.
    - split; [apply ML_Nil | exact H].
    - inversion H; subst. injection Hl as Hl.
      destruct (IH ts ρ k Hl H3). split; [apply ML_Cons|]; auto.
  Qed.

  Lemma matches_list_length : forall σ ψ ps ts,
    matches_list G D σ ψ ps ts -> length ps = length ts.
  Proof. intros σ ψ ps ts H. induction H; simpl; auto. Qed.

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
    intros. unfold tsub, gsub. simpl. rewrite vfind_add.
    destruct (Nat.eqb x y); reflexivity.
  Qed.

  Lemma fsub_add_f : forall Φ ρ F s y,
    fsub Φ (env_add_f ρ F s) y =
      if Nat.eqb F y then lookup s Φ else fsub Φ ρ y.
  Proof.
    intros. unfold fsub, gsub. simpl. rewrite vfind_add.
    destruct (Nat.eqb F y); reflexivity.
  Qed.

  Ltac solve_sub := first [assumption | apply sub_refl].

  Ltac bt H := right; apply ssol_backtrack in H; exact H.
  Ltac open_left H := destruct H as [[Hs [Hf Hk]]|H]; [left|right; exact H].

  Lemma ssol_step_back : forall Θ' Φ' st st',
    step G D st st' -> ssol Θ' Φ' st' -> ssol Θ' Φ' st.
  Proof.
    intros Θ' Φ' st st' Hst H.
    destruct Hst; simpl in H |- *.
    - (* ST-SUCCESS *) destruct H; subst. left. repeat split; try apply sub_refl; constructor.
    - (* ST-MATCH-VAR-BIND *) open_left H. split; [|split; auto].
      + eapply sub_trans; [apply sub_extend; exact H1 | exact Hs].
      + constructor; auto. simpl. apply P_Var. unfold tsub, gsub. rewrite H0.
        apply Hs, lookup_extend_eq.
    - (* ST-MATCH-VAR-BOUND *) open_left H. repeat split; auto. constructor; auto.
      simpl. apply P_Var. eapply sub_gsub; eauto.
    - (* ST-MATCH-VAR-CONFLICT *) bt H.
    - (* ST-MATCH-FUN *) open_left H.
      apply Forall_push_inv in Hk; auto. destruct Hk as [Hps Hk].
      repeat split; auto. constructor; auto. simpl. apply P_Fun; auto.
    - (* ST-MATCH-FUN-CONFLICT *) bt H.
    - (* ST-MATCH-ALT *) destruct H as [[Hs [Hf Hk]]|H].
      + inversion Hk; subst. left. repeat split; auto. constructor; auto.
        simpl. apply P_Alt1. auto.
      + inversion H; subst.
        * destruct H1 as [Hs [Hf Hk]]. simpl in *. inversion Hk; subst.
          left. repeat split; auto. constructor; auto. simpl. apply P_Alt2. auto.
        * right. auto.
    - (* ST-MATCH-GUARD *) open_left H.
      inversion Hk as [|? ? Hm Hk']; subst. inversion Hk'; subst.
      repeat split; auto. constructor; auto. simpl. apply P_Guard; auto.
    - (* ST-CHECKGUARD-CONTINUE *) open_left H.
      repeat split; auto. constructor; auto. simpl.
      eapply eval_guard_mono; [apply sub_gsub; exact Hs | apply sub_gsub; exact Hf | exact H0].
    - (* ST-CHECKGUARD-BACKTRACK *) bt H.
    - (* ST-MATCH-EXISTS *) open_left H.
      inversion Hk as [|? ? Hm Hk']; subst. inversion Hk' as [|? ? Hc Hk'']; subst.
      simpl in Hc. destruct (lookup nf Θ') as [t'|] eqn:Ht'; [|congruence].
      repeat split; auto. constructor; auto. simpl.
      apply P_Exists with (t' := t'). simpl in Hm.
      eapply matches_ext; [| | exact Hm].
      + intros y. rewrite tsub_add_t. unfold upd. destruct (Nat.eqb x y); auto.
      + intros y. reflexivity.
    - (* ST-MATCH-EXISTS for ∃F *) open_left H.
      inversion Hk as [|? ? Hm Hk']; subst. inversion Hk' as [|? ? Hc Hk'']; subst.
      simpl in Hc. destruct (lookup nf Φ') as [f|] eqn:Hf'; [|congruence].
      repeat split; auto. constructor; auto. simpl.
      apply P_ExistsF with (f := f). simpl in Hm.
      eapply matches_ext; [| | exact Hm].
      + intros y. reflexivity.
      + intros y. rewrite fsub_add_f. unfold upd. destruct (Nat.eqb F y); auto.
    - (* ST-CHECKNAME *) open_left H. repeat split; auto. constructor; auto.
      simpl. destruct (lookup s Θ) eqn:E; [|congruence].
      rewrite (Hs _ _ E). discriminate.
    - (* ST-CHECKNAME, backtrack *) bt H.
    - (* ST-CHECKFNAME *) open_left H. repeat split; auto. constructor; auto.
      simpl. destruct (lookup s Φ) eqn:E; [|congruence].
      rewrite (Hf _ _ E). discriminate.
    - (* ST-CHECKFNAME, backtrack *) bt H.
    - (* ST-MATCH-MATCHCONSTR *) open_left H.
      inversion Hk as [|? ? Hm Hk']; subst. inversion Hk' as [|? ? Hc Hk'']; subst.
      destruct Hc as [t' [Hx Hm']].
      repeat split; auto. constructor; auto. simpl. eapply P_MatchConstr; eauto.
    - (* ST-MATCHCONSTR *) open_left H.
      inversion Hk as [|? ? Hm Hk']; subst.
      repeat split; auto. constructor; auto. simpl. exists t. split; auto.
      eapply sub_gsub; eauto.
    - (* ST-MATCHCONSTR, backtrack *) bt H.
    - (* ST-MATCH-FUN-VAR-BIND *) open_left H.
      apply Forall_push_inv in Hk; auto. destruct Hk as [Hps Hk].
      split; [exact Hs|split].
      + eapply sub_trans; [apply sub_extend; exact H1 | exact Hf].
      + constructor; auto. simpl. apply P_FunVar; auto.
        unfold fsub, gsub. rewrite H0. apply Hf, lookup_extend_eq.
    - (* ST-MATCH-FUN-VAR-BOUND *) open_left H.
      apply Forall_push_inv in Hk; auto. destruct Hk as [Hps Hk].
      repeat split; auto. constructor; auto. simpl. apply P_FunVar; auto.
      eapply sub_gsub; eauto.
    - (* ST-MATCH-FUN-VAR-CONFLICT *) bt H.
    - (* ST-MATCH-MU *) open_left H.
      inversion Hk as [|? ? Hm Hk']; subst.
      repeat split; auto. constructor; auto. simpl. eapply P_Mu; eauto.
      eapply matches_ext; [| | exact Hm]; intros y;
        unfold tsub, fsub, call_env; simpl; rewrite gsub_call_map; reflexivity.
    - (* ST-MATCH-MU, bad call *) bt H.
  Qed.

  Lemma ssol_star_back : forall Θ' Φ' st st',
    star G D st st' -> ssol Θ' Φ' st' -> ssol Θ' Φ' st.
  Proof.
    intros Θ' Φ' st st' H. induction H; auto.
    intros. eapply ssol_step_back; eauto.
  Qed.

  (** The root's scope: variable [i] is slot [i]. *)
  Definition root_env (n m : nat) : env := mkEnv (ident_map n) (ident_map m).

  (** Theorem 2, first half. *)
  Theorem success_soundness : forall n m p t Θ Φ,
    star G D (init n m p t) (Success Θ Φ) ->
    matches G D (tsub Θ (root_env n m)) (fsub Φ (root_env n m)) p t.
  Proof.
    intros n m p t Θ Φ H.
    assert (Hs : ssol Θ Φ (init n m p t)) by (eapply ssol_star_back; eauto; simpl; auto).
    simpl in Hs. destruct Hs as [[_ [_ Hk]]|Hk].
    - inversion Hk; subst. exact H2.
    - inversion Hk.
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
    intros nf stk H. destruct stk as [|[[Θ Φ] k] stk]; simpl; auto.
    inversion H; subst. auto.
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
    unfold wf_def in Hw. apply andb_true_iff in Hw. destruct Hw as [Hw Hf].
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

  Ltac open_inv Hinv :=
    destruct Hinv as [[Hb1 [Hb2 [Hk1 Hk2]]] Hstk].

  Lemma inv_step : wf_defs D = true ->
    forall st st', step G D st st' -> inv st -> inv st'.
  Proof.
    intros Hd st st' Hst Hinv.
    destruct Hst; simpl in Hinv |- *; auto;
      try (open_inv Hinv; apply inv_backtrack; exact Hstk);
      open_inv Hinv; inversion Hk1 as [|? ? Ha Hk1']; subst; simpl in Hk2.
    - (* VAR-BIND *)
      destruct Hk2 as [_ Hk2]. destruct Ha as [Ha _].
      split; [|exact Hstk]. repeat split; auto.
      + apply dom_below_extend; auto. eapply Ha; eauto.
      + eapply wfk_mono; [| |exact Hk2].
        * intros s' [Hs'|Hs']; [apply bound_in_extend; exact Hs'|].
          apply img_single in Hs'. rewrite H in Hs'. inversion Hs'; subst.
          unfold bound_in. rewrite lookup_extend_eq. discriminate.
        * intros s' [Hs'|Hs']; [exact Hs'|]. destruct (img_nil _ _ Hs').
    - (* VAR-BOUND *)
      destruct Hk2 as [_ Hk2]. repeat split; auto.
      apply tsub_var in H. destruct H as [s [Hx Hs]].
      eapply wfk_mono; [| |exact Hk2].
      + intros s' [Hs'|Hs']; [exact Hs'|].
        apply img_single in Hs'. rewrite Hx in Hs'. inversion Hs'; subst.
        unfold bound_in. congruence.
      + intros s' [Hs'|Hs']; [exact Hs'|]. destruct (img_nil _ _ Hs').
    - (* FUN *)
      destruct Hk2 as [Hw Hk2]. repeat split; auto.
      + apply Forall_below_push; auto.
      + apply wfk_push; auto.
    - (* ALT *)
      destruct Hk2 as [Hw Hk2]. simpl in Hw. apply andb_true_iff in Hw.
      destruct Hw as [Hw1 Hw2].
      assert (Hm : forall p, (forall x, In x (inter (binds D p1) (binds D p2)) -> In x (binds D p)) ->
                     (forall x, In x (inter (fbinds D p1) (fbinds D p2)) -> In x (fbinds D p)) ->
                     wfk (union (bound_in Θ) (img (tenv ρ) (binds D p)))
                         (union (bound_in Φ) (img (fenv ρ) (fbinds D p))) k).
      { intros p Hp Hpf. eapply wfk_mono; [| |exact Hk2]; intros s' [Hs'|[y [Hy Hs']]];
          (left; exact Hs') || (right; exists y; split; auto). }
      split; [|constructor; [|exact Hstk]]; simpl.
      + repeat split; auto. all: try (constructor; auto).
        all: apply Hm; intros y Hy; apply In_inter in Hy; tauto.
      + repeat split; auto. all: try (constructor; auto).
        all: apply Hm; intros y Hy; apply In_inter in Hy; tauto.
    - (* GUARD *)
      destruct Hk2 as [Hw Hk2]. simpl in Hw.
      apply andb_true_iff in Hw. destruct Hw as [Hw Hwf].
      apply andb_true_iff in Hw. destruct Hw as [Hw Hwt].
      repeat split; auto.
      all: try (constructor; auto; constructor; auto).
      all: intros y s Hy Hs; right; exists y; split; auto; eapply subset_In; eauto.
    - (* CHECKGUARD-CONTINUE *) destruct Hk2 as [_ [_ Hk2]]. repeat split; auto.
    - (* EXISTS *)
      destruct Hk2 as [Hw Hk2]. simpl in Hw. apply andb_true_iff in Hw.
      destruct Hw as [Hw Hx]. apply memb_In in Hx. destruct Ha as [Ha1 Ha2].
      refine (conj (conj _ (conj _ (conj _ _))) _).
      + intros g v Hg. apply Hb1 in Hg. lia.
      + intros g v Hg. apply Hb2 in Hg. lia.
      + constructor; [|constructor; [simpl; lia|]].
        * split; simpl; intros y s Hy.
          -- rewrite vfind_add in Hy. destruct (Nat.eqb x y).
             ++ inversion Hy. lia.
             ++ apply Ha1 in Hy. lia.
          -- apply Ha2 in Hy. lia.
        * eapply Forall_impl; [|exact Hk1']. intros a. apply below_mono. lia.
      + simpl. split; auto. split.
        * right. exists x. split; auto. simpl. rewrite vfind_add, Nat.eqb_refl. reflexivity.
        * eapply wfk_mono; [| |exact Hk2].
          -- intros s' [Hs'|[y [Hy Hs']]]; [left; exact Hs'|].
             apply In_remove_var in Hy. destruct Hy as [Hy Hne].
             right. exists y. split; auto. simpl. rewrite vfind_add.
             apply Nat.eqb_neq in Hne. rewrite Hne. exact Hs'.
          -- intros s' Hs'. exact Hs'.
      + eapply Forall_impl; [|exact Hstk]. intros fr. apply branch_inv_mono. lia.
    - (* EXISTS for ∃F *)
      destruct Hk2 as [Hw Hk2]. simpl in Hw. apply andb_true_iff in Hw.
      destruct Hw as [Hw Hx]. apply memb_In in Hx. destruct Ha as [Ha1 Ha2].
      refine (conj (conj _ (conj _ (conj _ _))) _).
      + intros g v Hg. apply Hb1 in Hg. lia.
      + intros g v Hg. apply Hb2 in Hg. lia.
      + constructor; [|constructor; [simpl; lia|]].
        * split; simpl; intros y s Hy.
          -- apply Ha1 in Hy. lia.
          -- rewrite vfind_add in Hy. destruct (Nat.eqb F y).
             ++ inversion Hy. lia.
             ++ apply Ha2 in Hy. lia.
        * eapply Forall_impl; [|exact Hk1']. intros a. apply below_mono. lia.
      + simpl. split; auto. split.
        * right. exists F. split; auto. simpl. rewrite vfind_add, Nat.eqb_refl. reflexivity.
        * eapply wfk_mono; [| |exact Hk2].
          -- intros s' Hs'. exact Hs'.
          -- intros s' [Hs'|[y [Hy Hs']]]; [left; exact Hs'|].
             apply In_remove_var in Hy. destruct Hy as [Hy Hne].
             right. exists y. split; auto. simpl. rewrite vfind_add.
             apply Nat.eqb_neq in Hne. rewrite Hne. exact Hs'.
      + eapply Forall_impl; [|exact Hstk]. intros fr. apply branch_inv_mono. lia.
    - (* CHECKNAME *) destruct Hk2 as [_ Hk2]. repeat split; auto.
    - (* CHECKFNAME *) destruct Hk2 as [_ Hk2]. repeat split; auto.
    - (* MATCH-MATCHCONSTR *)
      destruct Hk2 as [Hw Hk2]. simpl in Hw.
      apply andb_true_iff in Hw. destruct Hw as [Hw Hx].
      apply andb_true_iff in Hw. destruct Hw as [Hw Hw']. apply memb_In in Hx.
      repeat split; auto.
      all: try (constructor; auto; constructor; auto).
      + intros s Hs. right. exists x. auto.
      + eapply wfk_mono; [| |exact Hk2];
          intros s' [Hs'|Hs']; try (left; left; exact Hs');
          apply img_app in Hs'; unfold union; tauto.
    - (* MATCHCONSTR *)
      destruct Hk2 as [_ [Hw Hk2]]. repeat split; auto.
    - (* FUN-VAR-BIND *)
      destruct Hk2 as [Hw Hk2]. destruct Ha as [Ha1 Ha2].
      repeat split; auto.
      + apply dom_below_extend; auto. eapply Ha2; eauto.
      + apply Forall_below_push; auto. split; auto.
      + apply wfk_push; auto. eapply wfk_mono; [| |exact Hk2].
        * intros s' Hs'. exact Hs'.
        * intros s' [Hs'|[y [[<-|Hy] Hs']]].
          -- left. apply bound_in_extend. exact Hs'.
          -- left. rewrite H in Hs'. inversion Hs'; subst.
             unfold bound_in. rewrite lookup_extend_eq. discriminate.
          -- right. exists y. auto.
    - (* FUN-VAR-BOUND *)
      destruct Hk2 as [Hw Hk2]. apply fsub_var in H. destruct H as [s [HF Hs]].
      repeat split; auto.
      + apply Forall_below_push; auto.
      + apply wfk_push; auto. eapply wfk_mono; [| |exact Hk2].
        * intros s' Hs'. exact Hs'.
        * intros s' [Hs'|[y [[<-|Hy] Hs']]].
          -- left. exact Hs'.
          -- left. rewrite HF in Hs'. inversion Hs'; subst.
             unfold bound_in. congruence.
          -- right. exists y. auto.
    - (* MU *)
      destruct Hk2 as [_ Hk2]. simpl in Hk2. rewrite H in Hk2.
      destruct (wf_defs_body Hd P d H) as [Hwb [Hpb Hpfb]].
      repeat split; auto.
      + constructor; auto. apply env_below_call. exact Ha.
      + eapply wfk_mono; [| |exact Hk2];
          intros s' [Hs'|Hs']; try (left; exact Hs'); right;
          eapply img_call; eauto.
  Qed.

  Lemma eval_expr_agree : forall σ σ' ψ ψ' e,
    (forall x, In x (expr_vars e) -> σ x = σ' x) ->
    (forall F, In F (expr_fvars e) -> ψ F = ψ' F) ->
    eval_expr G σ ψ e = eval_expr G σ' ψ' e.
  Proof.
    intros σ σ' ψ ψ' e. induction e; intros Hs Hf; simpl in *; auto.
    - rewrite Hs; auto.
    - rewrite Hf; auto.
    - rewrite IHe1, IHe2; auto; intros y Hy; first [apply Hs | apply Hf];
        apply in_or_app; auto.
    - rewrite IHe1, IHe2; auto; intros y Hy; first [apply Hs | apply Hf];
        apply in_or_app; auto.
    - rewrite IHe1, IHe2; auto; intros y Hy; first [apply Hs | apply Hf];
        apply in_or_app; auto.
  Qed.

  Lemma eval_guard_agree : forall σ σ' ψ ψ' g,
    (forall x, In x (guard_vars g) -> σ x = σ' x) ->
    (forall F, In F (guard_fvars g) -> ψ F = ψ' F) ->
    eval_guard G σ ψ g = eval_guard G σ' ψ' g.
  Proof.
    intros σ σ' ψ ψ' g. induction g; intros Hs Hf; simpl in *; auto.
    - rewrite !(eval_expr_agree σ σ' ψ ψ'); auto; intros y Hy;
        first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite !(eval_expr_agree σ σ' ψ ψ'); auto; intros y Hy;
        first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IHg1, IHg2; auto; intros y Hy;
        first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IHg1, IHg2; auto; intros y Hy;
        first [apply Hs | apply Hf]; apply in_or_app; auto.
    - rewrite IHg; auto.
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
    intros nf Θ1 Φ1 Θ2 Φ2 k HΘ HΦ Hb H. induction H; auto.
    inversion Hb; subst. constructor; auto. eapply holds_agree; eauto.
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
    - inversion H.
    - inversion H; subst; [left | right]; auto.
  Qed.

  Lemma lookup_add_other : forall nf v Θ g,
    g < nf -> lookup g (extend nf v Θ) = lookup g Θ.
  Proof. intros. apply lookup_extend_neq. lia. Qed.

  Ltac bt_case H := apply fsol_backtrack; destruct H as [[Θ' [Φ' [Hs [Hf Hk]]]]|H];
    [exfalso; inversion Hk as [|? ? Hm Hk']; subst; simpl in Hm | exact H].
  Ltac keep H := destruct H as [[Θ' [Φ' [Hs [Hf Hk]]]]|H]; [left; exists Θ', Φ' | right; exact H];
    inversion Hk as [|? ? Hm Hk']; subst; simpl in Hm.

  Lemma fsol_step : forall st st', step G D st st' -> inv st -> fsol st -> fsol st'.
  Proof.
    intros st st' Hst Hinv H. destruct Hst; simpl in H |- *; auto.
    - (* VAR-BIND *) keep H. inversion Hm; subst. repeat split; auto.
      apply extend_sub; auto.
      match goal with Hx : tsub _ _ _ = Some _ |- _ =>
        unfold tsub, gsub in Hx; rewrite H0 in Hx; exact Hx end.
    - (* VAR-BOUND *) keep H. repeat split; auto.
    - (* VAR-CONFLICT *) bt_case H. inversion Hm; subst.
      destruct H0 as [H0|[t' [Ht' Hne]]].
      + match goal with Hx : tsub _ _ _ = Some _ |- _ =>
          unfold tsub, gsub in Hx; rewrite H0 in Hx; discriminate end.
      + apply (sub_gsub _ _ (tenv ρ) Hs) in Ht'.
        match goal with Hx : tsub _ _ _ = Some _ |- _ => unfold tsub in Hx; congruence end.
    - (* FUN *) keep H. inversion Hm; subst. repeat split; auto. apply Forall_push; auto.
    - (* FUN-CONFLICT *) bt_case H. inversion Hm; subst.
      match goal with Hl : matches_list _ _ _ _ _ _ |- _ => apply matches_list_length in Hl end.
      destruct H0; congruence.
    - (* ALT *) destruct H as [[Θ' [Φ' [Hs [Hf Hk]]]]|H].
      + inversion Hk as [|? ? Hm Hk']; subst. simpl in Hm. inversion Hm; subst.
        * left. exists Θ', Φ'. repeat split; auto.
        * right. apply Exists_cons_hd. exists Θ', Φ'. simpl. repeat split; auto.
      + right. apply Exists_cons_tl. exact H.
    - (* GUARD *) keep H. inversion Hm; subst. repeat split; auto.
    - (* CHECKGUARD-CONTINUE *) keep H. repeat split; auto.
    - (* CHECKGUARD-BACKTRACK *) bt_case H.
      destruct Hinv as [[_ [_ [_ Hw]]] _]. simpl in Hw. destruct Hw as [Hg1 [Hg2 _]].
      apply H0. rewrite <- Hm. apply eval_guard_agree.
      + intros y Hy. unfold tsub, gsub. destruct (vfind y (tenv ρ)) eqn:E; auto.
        specialize (Hg1 y n Hy E). unfold bound_in in Hg1.
        destruct (lookup n Θ) eqn:E2; [|congruence]. rewrite (Hs _ _ E2). reflexivity.
      + intros y Hy. unfold fsub, gsub. destruct (vfind y (fenv ρ)) eqn:E; auto.
        specialize (Hg2 y n Hy E). unfold bound_in in Hg2.
        destruct (lookup n Φ) eqn:E2; [|congruence]. rewrite (Hf _ _ E2). reflexivity.
    - (* EXISTS *) destruct H as [[Θ' [Φ' [Hs [Hf Hk]]]]|H]; [left|right; exact H].
      inversion Hk as [|? ? Hm Hk']; subst. simpl in Hm. inversion Hm; subst.
      destruct Hinv as [[Hb1 [Hb2 [Hk1 _]]] _].
      inversion Hk1 as [|? ? Ha Hk1']; subst. destruct Ha as [Ha1 Ha2].
      exists (extend nf t' Θ'), Φ'. repeat split; auto.
      + intros g v Hg. rewrite lookup_add_other; [apply Hs; exact Hg|]. eapply Hb1; eauto.
      + constructor; [|constructor].
        * simpl. match goal with Hx : matches _ _ (upd _ _ _) _ _ _ |- _ =>
            eapply matches_ext; [| |exact Hx] end.
          -- intros y. rewrite tsub_add_t. unfold upd.
             destruct (Nat.eqb x y); [rewrite lookup_extend_eq; reflexivity|].
             unfold tsub, gsub. destruct (vfind y (tenv ρ)) eqn:E; auto.
             rewrite lookup_add_other; auto. eapply Ha1; eauto.
          -- intros y. reflexivity.
        * simpl. rewrite lookup_extend_eq. discriminate.
        * eapply Forall_holds_agree; [| |exact Hk1'|exact Hk'].
          -- intros g Hg. symmetry. apply lookup_add_other. exact Hg.
          -- reflexivity.
    - (* EXISTS for ∃F *) destruct H as [[Θ' [Φ' [Hs [Hf Hk]]]]|H]; [left|right; exact H].
      inversion Hk as [|? ? Hm Hk']; subst. simpl in Hm. inversion Hm; subst.
      destruct Hinv as [[Hb1 [Hb2 [Hk1 _]]] _].
      inversion Hk1 as [|? ? Ha Hk1']; subst. destruct Ha as [Ha1 Ha2].
      exists Θ', (extend nf f Φ'). repeat split; auto.
      + intros g v Hg. rewrite lookup_add_other; [apply Hf; exact Hg|]. eapply Hb2; eauto.
      + constructor; [|constructor].
        * simpl. match goal with Hx : matches _ _ _ (upd _ _ _) _ _ |- _ =>
            eapply matches_ext; [| |exact Hx] end.
          -- intros y. reflexivity.
          -- intros y. rewrite fsub_add_f. unfold upd.
             destruct (Nat.eqb F y); [rewrite lookup_extend_eq; reflexivity|].
             unfold fsub, gsub. destruct (vfind y (fenv ρ)) eqn:E; auto.
             rewrite lookup_add_other; auto. eapply Ha2; eauto.
        * simpl. rewrite lookup_extend_eq. discriminate.
        * eapply Forall_holds_agree; [| |exact Hk1'|exact Hk'].
          -- reflexivity.
          -- intros g Hg. symmetry. apply lookup_add_other. exact Hg.
    - (* CHECKNAME *) keep H. repeat split; auto.
    - (* CHECKNAME-BACKTRACK *) bt_case H.
      destruct Hinv as [[_ [_ [_ Hw]]] _]. simpl in Hw. destruct Hw as [Hw _].
      apply Hw. exact H0.
    - (* CHECKFNAME *) keep H. repeat split; auto.
    - (* CHECKFNAME-BACKTRACK *) bt_case H.
      destruct Hinv as [[_ [_ [_ Hw]]] _]. simpl in Hw. destruct Hw as [Hw _].
      apply Hw. exact H0.
    - (* MATCH-MATCHCONSTR *) keep H. inversion Hm; subst. repeat split; auto.
      constructor; auto. constructor; auto. simpl. eauto.
    - (* MATCHCONSTR *) keep H. destruct Hm as [t' [Hx Hm]].
      apply (sub_gsub _ _ (tenv ρ) Hs) in H0. unfold tsub in Hx. rewrite H0 in Hx.
      inversion Hx; subst. repeat split; auto.
    - (* MATCHCONSTR-BACKTRACK *) bt_case H.
      destruct Hm as [t' [Hx _]].
      destruct Hinv as [[_ [_ [_ Hw]]] _]. simpl in Hw. destruct Hw as [Hw _].
      apply tsub_var in Hx. destruct Hx as [sl [Hv _]].
      specialize (Hw sl Hv). unfold bound_in in Hw. unfold tsub, gsub in H0.
      rewrite Hv in H0. congruence.
    - (* FUN-VAR-BIND *) keep H. inversion Hm; subst. repeat split; auto.
      + apply extend_sub; auto.
        match goal with Hx : fsub _ _ _ = Some _ |- _ =>
          unfold fsub, gsub in Hx; rewrite H0 in Hx; exact Hx end.
      + apply Forall_push; auto.
    - (* FUN-VAR-BOUND *) keep H. inversion Hm; subst. repeat split; auto.
      apply Forall_push; auto.
    - (* FUN-VAR-CONFLICT *) bt_case H. inversion Hm; subst.
      destruct H0 as [H0|[[f [Hf' Hne]]|H0]].
      + match goal with Hx : fsub _ _ _ = Some _ |- _ =>
          unfold fsub, gsub in Hx; rewrite H0 in Hx; discriminate end.
      + apply (sub_gsub _ _ (fenv ρ) Hf) in Hf'.
        match goal with Hx : fsub _ _ _ = Some _ |- _ => unfold fsub in Hx; congruence end.
      + match goal with Hl : matches_list _ _ _ _ _ _ |- _ => apply matches_list_length in Hl end.
        congruence.
    - (* MU *) keep H. inversion Hm; subst.
      match goal with Hn : nth_error D P = Some _ |- _ => rewrite H0 in Hn; inversion Hn; subst end.
      repeat split; auto. constructor; auto. simpl.
      match goal with Hx : matches _ _ (call_sub _ _) _ _ _ |- _ =>
        eapply matches_ext; [| |exact Hx] end; intros y;
        unfold tsub, fsub, call_env; simpl; rewrite gsub_call_map; reflexivity.
    - (* MU-CONFLICT *) bt_case H. inversion Hm; subst.
      edestruct H0 as [Hc|Hc]; [eassumption| |]; apply Hc; assumption.
  Qed.

  Lemma fsol_star : wf_defs D = true ->
    forall st st', star G D st st' -> inv st -> fsol st -> fsol st'.
  Proof.
    intros Hd st st' H. induction H; auto.
    intros Hi Hf. apply IHstar.
    - eapply inv_step; eauto.
    - eapply fsol_step; eauto.
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
    intros. apply success_soundness. eapply run_refines_success. exact H.
  Qed.

  Theorem match_pattern_fail_sound : forall fuel n m p t,
    wf_defs D = true -> wfb D p = true ->
    match_pattern G D fuel n m p t = OFailure ->
    forall σ ψ, (forall x, n <= x -> σ x = None) -> (forall F, m <= F -> ψ F = None) ->
    ~ matches G D σ ψ p t.
  Proof.
    intros. eapply failure_soundness; eauto. eapply run_refines_failure. exact H1.
  Qed.
End Soundness.
