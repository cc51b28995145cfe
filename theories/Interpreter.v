(** * The executable matcher: a fuel-bounded interpreter of the step relation

    [step_fn] computes the successor of a running state, choosing the rule of
    Figures 7/17 that applies; [run] iterates it at most [fuel] times. This is
    the function extracted to OCaml, and [run_refines_success] /
    [run_refines_failure] say that every [OSuccess]/[OFailure] it returns is
    reachable by the step relation, so the soundness theorems of
    [Soundness.v] hold for the extracted code. *)

From Coq Require Import ZArith List Bool Arith.
From PyPM Require Import Syntax Subst Declarative Algorithmic.
Import ListNotations.

(** [OutOfFuel] is reported distinctly, never confused with failure. *)
Inductive outcome :=
| OSuccess (θ : subst)
| OFailure
| OOutOfFuel.

Section Interpreter.
  Variable G : graph.

  Definition step_fn (st : state) : state :=
    match st with
    | Running θ stk [] => Success θ                                 (* ST-SUCCESS *)
    | Running θ stk (AMatch (PVar x) t :: k) =>
        match lookup x θ with
        | None => Running (extend x t θ) stk k                      (* ST-MATCH-VAR-BIND *)
        | Some t' =>
            if Nat.eqb t' t then Running θ stk k                    (* ST-MATCH-VAR-BOUND *)
            else backtrack stk                                      (* ST-MATCH-VAR-CONFLICT *)
        end
    | Running θ stk (AMatch (PApp f ps) t :: k) =>
        let ts := children G t in
        if Nat.eqb (label G t) f && Nat.eqb (length ps) (length ts)
        then Running θ stk (push_matches ps ts k)                   (* ST-MATCH-FUN *)
        else backtrack stk                                          (* ST-MATCH-FUN-CONFLICT *)
    | Running θ stk (AMatch (PAlt p1 p2) t :: k) =>                 (* ST-MATCH-ALT *)
        Running θ ((θ, AMatch p2 t :: k) :: stk) (AMatch p1 t :: k)
    | Running θ stk (AMatch (PGuard p g) t :: k) =>                 (* ST-MATCH-GUARD *)
        Running θ stk (AMatch p t :: AGuard g :: k)
    | Running θ stk (AGuard g :: k) =>
        match eval_guard G θ g with
        | Some true => Running θ stk k                              (* ST-CHECKGUARD-CONTINUE *)
        | _ => backtrack stk                                        (* ST-CHECKGUARD-BACKTRACK *)
        end
    | st => st
    end.

  (** [step_fn] takes a step of the relation from every running state. *)
  Lemma step_fn_step : forall θ stk k,
    step G (Running θ stk k) (step_fn (Running θ stk k)).
  Proof.
    intros θ stk k. destruct k as [|a k].
    - apply ST_Success.
    - destruct a as [p t|g].
      + destruct p as [x|f ps|p1 p2|p g]; simpl.
        * destruct (lookup x θ) as [t'|] eqn:Hx.
          -- destruct (Nat.eqb t' t) eqn:He.
             ++ apply Nat.eqb_eq in He. subst. apply ST_Match_Var_Bound. exact Hx.
             ++ apply Nat.eqb_neq in He. eapply ST_Match_Var_Conflict; eauto.
          -- apply ST_Match_Var_Bind. exact Hx.
        * destruct (Nat.eqb (label G t) f) eqn:Hf;
            destruct (Nat.eqb (length ps) (length (children G t))) eqn:Hl; simpl.
          -- apply Nat.eqb_eq in Hf, Hl. apply ST_Match_Fun; auto.
          -- apply Nat.eqb_neq in Hl. apply ST_Match_Fun_Conflict. auto.
          -- apply Nat.eqb_neq in Hf. apply ST_Match_Fun_Conflict. auto.
          -- apply Nat.eqb_neq in Hf. apply ST_Match_Fun_Conflict. auto.
        * apply ST_Match_Alt.
        * apply ST_Match_Guard.
      + simpl. destruct (eval_guard G θ g) as [[|]|] eqn:Hg.
        * apply ST_CheckGuard_Continue. exact Hg.
        * apply ST_CheckGuard_Backtrack. congruence.
        * apply ST_CheckGuard_Backtrack. congruence.
  Qed.

  (** The relation is deterministic and [step_fn] is exactly it: whatever
      rule applies, [step_fn] takes it. *)
  Lemma step_deterministic_fn : forall st st',
    step G st st' -> step_fn st = st'.
  Proof.
    intros st st' H. destruct H; simpl; auto.
    - rewrite H. reflexivity.
    - rewrite H, Nat.eqb_refl. reflexivity.
    - rewrite H. apply Nat.eqb_neq in H0. rewrite H0. reflexivity.
    - rewrite H, H0, !Nat.eqb_refl. reflexivity.
    - destruct H as [H|H].
      + apply Nat.eqb_neq in H. rewrite H. reflexivity.
      + apply Nat.eqb_neq in H. rewrite H, andb_false_r. reflexivity.
    - rewrite H. reflexivity.
    - destruct (eval_guard G θ g) as [[|]|]; congruence.
  Qed.

  Fixpoint run (fuel : nat) (st : state) : outcome :=
    match st with
    | Success θ => OSuccess θ
    | Failure => OFailure
    | Running _ _ _ =>
        match fuel with
        | O => OOutOfFuel
        | S n => run n (step_fn st)
        end
    end.

  (** The matcher called from OCaml: run [init p t] with [fuel] steps. *)
  Definition match_pattern (fuel : nat) (p : pattern) (t : node) : outcome :=
    run fuel (init p t).

  Lemma step_fn_running : forall st,
    (exists θ stk k, st = Running θ stk k) -> step G st (step_fn st).
  Proof. intros st (θ & stk & k & ->). apply step_fn_step. Qed.

  (** Interpreter refinement: a success the function reports is reachable. *)
  Theorem run_refines_success : forall fuel st θ,
    run fuel st = OSuccess θ -> star G st (Success θ).
  Proof.
    induction fuel as [|n IH]; intros st θ H; destruct st as [θ0 stk k|θ0|];
      simpl in H; try discriminate.
    - inversion H. apply star_refl.
    - eapply star_step; [apply step_fn_step | apply IH; exact H].
    - inversion H. apply star_refl.
  Qed.

  (** Interpreter refinement: a failure the function reports is reachable. *)
  Theorem run_refines_failure : forall fuel st,
    run fuel st = OFailure -> star G st Failure.
  Proof.
    induction fuel as [|n IH]; intros st H; destruct st as [θ0 stk k|θ0|];
      simpl in H; try discriminate.
    - apply star_refl.
    - eapply star_step; [apply step_fn_step | apply IH; exact H].
    - apply star_refl.
  Qed.

  (** And conversely, every terminal state the relation reaches is what
      [run] returns given enough fuel (the relation is deterministic). *)
  Theorem run_complete : forall st st',
    star G st st' ->
    (forall θ, st' = Success θ -> exists fuel, run fuel st = OSuccess θ) /\
    (st' = Failure -> exists fuel, run fuel st = OFailure).
  Proof.
    intros st st' H. induction H as [st|st st1 st2 Hs _ [IHs IHf]].
    - split.
      + intros θ ->. exists 0. reflexivity.
      + intros ->. exists 0. reflexivity.
    - apply step_deterministic_fn in Hs as Hfn.
      assert (Hrun : exists θ stk k, st = Running θ stk k)
        by (destruct Hs; eauto).
      destruct Hrun as (θ0 & stk & k & ->).
      split.
      + intros θ Heq. destruct (IHs θ Heq) as [fuel Hf].
        exists (S fuel). cbn [run]. rewrite Hfn. exact Hf.
      + intros Heq. destruct (IHf Heq) as [fuel Hf].
        exists (S fuel). cbn [run]. rewrite Hfn. exact Hf.
  Qed.
End Interpreter.
