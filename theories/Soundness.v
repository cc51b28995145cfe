(** * Soundness of the algorithmic semantics (the paper's Theorem 2)

    - [success_soundness]: [running(∅, [], [match(p, t)]) ↦* success(θ)]
      implies [p @ θ ≈ t];
    - [failure_soundness]: [running(∅, [], [match(p, t)]) ↦* failure]
      implies that no θ has [p @ θ ≈ t] (for well-formed [p], see [wfb]);
    - [match_pattern_sound], [match_pattern_fail_sound]: the same for the
      extracted function [match_pattern], through the refinement theorems of
      [Interpreter.v].

    Both soundness proofs use one invariant, [rsol θ' st]: "θ' is a solution
    of [st]", i.e. either the current branch can be completed to θ' (θ ⊆ θ'
    and every pending action holds under θ') or some saved backtrack frame
    can. Success: the invariant for the final θ holds of [success(θ)] and is
    preserved backwards along each step. Failure: it is preserved forwards,
    and [failure] has no solution. *)

From Coq Require Import ZArith List Bool Arith.
From PyPM Require Import Syntax Subst Declarative Algorithmic Interpreter.
Import ListNotations.

Section Soundness.
  Variable G : graph.

  (** An action holds under a final substitution θ'. *)
  Definition holds (θ' : subst) (a : action) : Prop :=
    match a with
    | AMatch p t => matches G p θ' t
    | AGuard g => guard_holds G θ' g
    end.

  (** The branch (θ, k) can be completed to θ'. *)
  Definition branch_sol (θ' : subst) (θ : subst) (k : cont) : Prop :=
    sub θ θ' /\ Forall (holds θ') k.

  Definition running_sol (θ' : subst) (θ : subst) (stk : list frame) (k : cont) :=
    branch_sol θ' θ k \/ Exists (fun fr => branch_sol θ' (fst fr) (snd fr)) stk.

  (** Pushing the argument matches of ST-MATCH-FUN. *)
  Lemma Forall_push : forall θ' ps ts k,
    matches_list G ps θ' ts -> Forall (holds θ') k ->
    Forall (holds θ') (push_matches ps ts k).
  Proof.
    intros θ' ps ts k H Hk. induction H; simpl; auto.
  Qed.

  Lemma Forall_push_inv : forall θ' ps ts k,
    length ps = length ts -> Forall (holds θ') (push_matches ps ts k) ->
    matches_list G ps θ' ts /\ Forall (holds θ') k.
  Proof.
    intros θ' ps. induction ps as [|p ps IH]; intros ts k Hl H;
      destruct ts as [|t ts]; simpl in *; try discriminate.
    - split; [apply ML_Nil | exact H].
    - inversion H; subst. injection Hl as Hl.
      destruct (IH ts k Hl H3). split; [apply ML_Cons|]; auto.
  Qed.

  Lemma backtrack_sol : forall θ' stk,
    Exists (fun fr => branch_sol θ' (fst fr) (snd fr)) stk ->
    match backtrack stk with
    | Running θ stk' k => running_sol θ' θ stk' k
    | _ => False
    end.
  Proof.
    intros θ' stk H. destruct stk as [|[θ k] stk]; simpl.
    - inversion H.
    - inversion H; subst; [left | right]; auto.
  Qed.

  (** ** Success soundness *)

  Definition ssol (θ' : subst) (st : state) : Prop :=
    match st with
    | Running θ stk k => running_sol θ' θ stk k
    | Success θ => θ = θ'
    | Failure => False
    end.

  Lemma ssol_backtrack : forall θ' stk,
    ssol θ' (backtrack stk) ->
    Exists (fun fr => branch_sol θ' (fst fr) (snd fr)) stk.
  Proof.
    intros θ' stk H. destruct stk as [|[θ k] stk]; simpl in H.
    - destruct H.
    - destruct H as [H|H]; [apply Exists_cons_hd | apply Exists_cons_tl]; auto.
  Qed.

  Lemma ssol_step_back : forall θ' st st',
    step G st st' -> ssol θ' st' -> ssol θ' st.
  Proof.
    intros θ' st st' Hst H. destruct Hst; simpl in *.
    - (* ST-SUCCESS *) subst. left. split; [apply sub_refl | constructor].
    - (* ST-MATCH-VAR-BIND *)
      destruct H as [[Hs Hk]|H]; [left|right; exact H].
      split.
      + eapply sub_trans; [apply sub_extend; exact H0 | exact Hs].
      + constructor; auto. simpl. apply P_Var. apply Hs, lookup_extend_eq.
    - (* ST-MATCH-VAR-BOUND *)
      destruct H as [[Hs Hk]|H]; [left|right; exact H].
      split; auto. constructor; auto. simpl. apply P_Var. auto.
    - (* ST-MATCH-VAR-CONFLICT *) right. apply ssol_backtrack. exact H.
    - (* ST-MATCH-FUN *)
      destruct H as [[Hs Hk]|H]; [left|right; exact H].
      apply Forall_push_inv in Hk; auto. destruct Hk as [Hps Hk].
      split; auto. constructor; auto. simpl. apply P_Fun; auto.
    - (* ST-MATCH-FUN-CONFLICT *) right. apply ssol_backtrack. exact H.
    - (* ST-MATCH-ALT *)
      destruct H as [[Hs Hk]|H].
      + inversion Hk; subst. left. split; auto. constructor; auto.
        simpl. apply P_Alt1. auto.
      + inversion H; subst.
        * destruct H1 as [Hs Hk]. simpl in *. inversion Hk; subst.
          left. split; auto. constructor; auto. simpl. apply P_Alt2. auto.
        * right. auto.
    - (* ST-MATCH-GUARD *)
      destruct H as [[Hs Hk]|H]; [left|right; exact H].
      inversion Hk; subst. inversion H2; subst.
      split; auto. constructor; auto. simpl. apply P_Guard; auto.
    - (* ST-CHECKGUARD-CONTINUE *)
      destruct H as [[Hs Hk]|H]; [left|right; exact H].
      split; auto. constructor; auto. simpl. unfold guard_holds.
      eapply eval_guard_mono; eauto.
    - (* ST-CHECKGUARD-BACKTRACK *) right. apply ssol_backtrack. exact H.
  Qed.

  Lemma ssol_star_back : forall θ' st st',
    star G st st' -> ssol θ' st' -> ssol θ' st.
  Proof.
    intros θ' st st' H. induction H; auto.
    intros. eapply ssol_step_back; eauto.
  Qed.

  (** Theorem 2, first half. *)
  Theorem success_soundness : forall p t θ,
    star G (init p t) (Success θ) -> matches G p θ t.
  Proof.
    intros p t θ H.
    assert (Hs : ssol θ (init p t)) by (eapply ssol_star_back; eauto; reflexivity).
    simpl in Hs. destruct Hs as [[_ Hk]|Hk].
    - inversion Hk; subst. exact H2.
    - inversion Hk.
  Qed.

  (** ** Failure soundness *)

  (** Well-formed continuations: every guard action only reads variables
      bound by the time it runs ([B] is the set bound so far). *)
  Fixpoint wfk (B : var -> Prop) (k : cont) : Prop :=
    match k with
    | [] => True
    | AMatch p _ :: k' => wfb p = true /\ wfk (fun x => In x (binds p) \/ B x) k'
    | AGuard g :: k' => (forall x, In x (guard_vars g) -> B x) /\ wfk B k'
    end.

  Lemma wfk_mono : forall k (B B' : var -> Prop),
    (forall x, B x -> B' x) -> wfk B k -> wfk B' k.
  Proof.
    induction k as [|a k IH]; intros B B' HB H; simpl in *; auto.
    destruct a as [p t|g]; destruct H as [H1 H2]; split; auto.
    - eapply IH; [|exact H2]. intros x [Hx|Hx]; auto.
    - eapply IH; [|exact H2]. exact HB.
  Qed.

  Lemma wfk_push : forall ps ts k B,
    length ps = length ts -> forallb wfb ps = true ->
    wfk (fun x => In x (flat_map binds ps) \/ B x) k ->
    wfk B (push_matches ps ts k).
  Proof.
    induction ps as [|p ps IH]; intros ts k B Hl Hw H; destruct ts as [|t ts];
      simpl in *; try discriminate.
    - eapply wfk_mono; [|exact H]. intros x [[]|Hx]; auto.
    - apply andb_true_iff in Hw. destruct Hw as [Hp Hps]. split; auto.
      apply IH; auto. eapply wfk_mono; [|exact H].
      intros x [Hx|Hx]; auto. apply in_app_or in Hx.
      destruct Hx as [Hx|Hx]; auto.
  Qed.

  Definition inv (st : state) : Prop :=
    match st with
    | Running θ stk k =>
        wfk (bound θ) k /\ Forall (fun fr => wfk (bound (fst fr)) (snd fr)) stk
    | _ => True
    end.

  Lemma inv_backtrack : forall stk,
    Forall (fun fr => wfk (bound (fst fr)) (snd fr)) stk -> inv (backtrack stk).
  Proof.
    intros stk H. destruct stk as [|[θ k] stk]; simpl; auto.
    inversion H; subst. auto.
  Qed.

  Lemma inv_step : forall st st', step G st st' -> inv st -> inv st'.
  Proof.
    intros st st' Hst H. destruct Hst; simpl in *; auto;
      try (apply inv_backtrack; tauto).
    - destruct H as [[_ Hk] Hstk]. split; auto.
      eapply wfk_mono; [|exact Hk].
      intros y [[<-|[]]|Hy]; apply bound_extend; auto.
    - destruct H as [[_ Hk] Hstk]. split; auto.
      eapply wfk_mono; [|exact Hk].
      intros y [[<-|[]]|Hy]; auto. unfold bound. congruence.
    - destruct H as [[Hw Hk] Hstk]. split; auto.
      apply wfk_push; auto.
    - destruct H as [[Hw Hk] Hstk]. apply andb_true_iff in Hw.
      destruct Hw as [Hw1 Hw2]. split.
      + split; auto. eapply wfk_mono; [|exact Hk].
        intros y [Hy|Hy]; auto. left. apply In_binds_alt in Hy. tauto.
      + constructor; auto. simpl. split; auto.
        eapply wfk_mono; [|exact Hk].
        intros y [Hy|Hy]; auto. left. apply In_binds_alt in Hy. tauto.
    - destruct H as [[Hw Hk] Hstk]. apply andb_true_iff in Hw.
      destruct Hw as [Hw1 Hw2]. split; auto. split; auto. simpl. split; auto.
      intros y Hy. left. rewrite forallb_forall in Hw2.
      apply memb_In. auto.
    - destruct H as [[_ Hk] Hstk]. auto.
  Qed.

  Definition fsol (θ' : subst) (st : state) : Prop :=
    match st with
    | Running θ stk k => running_sol θ' θ stk k
    | Success _ => True
    | Failure => False
    end.

  Lemma fsol_backtrack : forall θ' stk,
    Exists (fun fr => branch_sol θ' (fst fr) (snd fr)) stk ->
    fsol θ' (backtrack stk).
  Proof.
    intros θ' stk H. destruct stk as [|[θ k] stk]; simpl.
    - inversion H.
    - inversion H; subst; [left | right]; auto.
  Qed.

  Lemma fsol_step : forall θ' st st',
    step G st st' -> inv st -> fsol θ' st -> fsol θ' st'.
  Proof.
    intros θ' st st' Hst Hinv H. destruct Hst; simpl in *; auto.
    - (* ST-MATCH-VAR-BIND *)
      destruct H as [[Hs Hk]|H]; [left|right; exact H].
      inversion Hk; subst. inversion H2; subst. split; auto.
      apply extend_sub; auto.
    - (* ST-MATCH-VAR-BOUND *)
      destruct H as [[Hs Hk]|H]; [left|right; exact H].
      inversion Hk; subst. split; auto.
    - (* ST-MATCH-VAR-CONFLICT *)
      apply fsol_backtrack. destruct H as [[Hs Hk]|H]; auto. exfalso.
      inversion Hk; subst.
      match goal with Hm : holds _ (AMatch (PVar _) _) |- _ =>
        inversion Hm; subst end.
      match goal with
      | Hx : lookup ?x ?th = Some ?a, Hne : ?a <> ?b,
        Hy : lookup ?x θ' = Some ?b |- _ => apply Hs in Hx; congruence
      end.
    - (* ST-MATCH-FUN *)
      destruct H as [[Hs Hk]|H]; [left|right; exact H].
      inversion Hk; subst.
      match goal with Hm : holds _ (AMatch (PApp _ _) _) |- _ =>
        inversion Hm; subst end.
      split; auto. apply Forall_push; auto.
    - (* ST-MATCH-FUN-CONFLICT *)
      apply fsol_backtrack. destruct H as [[Hs Hk]|H]; auto. exfalso.
      assert (Hlen : forall ps ts, matches_list G ps θ' ts -> length ps = length ts).
      { intros ps' ts' Hm. induction Hm; simpl; auto. }
      inversion Hk; subst.
      match goal with Hm : holds _ (AMatch (PApp _ _) _) |- _ =>
        inversion Hm; subst end.
      match goal with Hml : matches_list _ _ _ _ |- _ => apply Hlen in Hml end.
      match goal with Hc : _ \/ _ |- _ => destruct Hc; congruence end.
    - (* ST-MATCH-ALT *)
      destruct H as [[Hs Hk]|H].
      + inversion Hk as [|? ? Hm Hk']; subst. inversion Hm; subst.
        * left. split; auto.
        * right. apply Exists_cons_hd. simpl. split; auto.
      + right. apply Exists_cons_tl. exact H.
    - (* ST-MATCH-GUARD *)
      destruct H as [[Hs Hk]|H]; [left|right; exact H].
      inversion Hk as [|? ? Hm Hk']; subst. inversion Hm; subst.
      split; auto.
    - (* ST-CHECKGUARD-CONTINUE *)
      destruct H as [[Hs Hk]|H]; [left|right; exact H].
      inversion Hk; subst. split; auto.
    - (* ST-CHECKGUARD-BACKTRACK: the guard reads only bound variables, so
         it evaluates under θ' as under θ. *)
      apply fsol_backtrack. destruct H as [[Hs Hk]|H]; auto. exfalso.
      inversion Hk as [|? ? Hm Hk']; subst. simpl in Hm. unfold guard_holds in Hm.
      destruct Hinv as [[Hg _] _].
      rewrite (eval_guard_stable G θ θ' g Hg Hs) in Hm. congruence.
  Qed.

  Lemma fsol_star : forall θ' st st',
    star G st st' -> inv st -> fsol θ' st -> fsol θ' st'.
  Proof.
    intros θ' st st' H. induction H; auto.
    intros Hi Hf. apply IHstar.
    - eapply inv_step; eauto.
    - eapply fsol_step; eauto.
  Qed.

  (** Theorem 2, second half. *)
  Theorem failure_soundness : forall p t,
    wfb p = true -> star G (init p t) Failure -> forall θ, ~ matches G p θ t.
  Proof.
    intros p t Hwf H θ Hm.
    apply (fsol_star θ _ _ H).
    - simpl. split; [|constructor]. split; auto.
    - simpl. left. split; [apply sub_empty | repeat constructor; auto].
  Qed.

  (** ** The extracted matcher is sound *)

  Theorem match_pattern_sound : forall fuel p t θ,
    match_pattern G fuel p t = OSuccess θ -> matches G p θ t.
  Proof.
    intros. apply success_soundness. eapply run_refines_success. exact H.
  Qed.

  Theorem match_pattern_fail_sound : forall fuel p t,
    wfb p = true -> match_pattern G fuel p t = OFailure ->
    forall θ, ~ matches G p θ t.
  Proof.
    intros. apply failure_soundness; auto. eapply run_refines_failure. exact H0.
  Qed.
End Soundness.
