(** * The executable matcher: a fuel-bounded interpreter of the step relation

    [step_fn] computes the successor of a running state, choosing the rule of
    Figures 7, 17 and 18 that applies; [run] iterates it at most [fuel]
    times. This is the function extracted to OCaml. [run_refines_success] /
    [run_refines_failure] say that every [OSuccess]/[OFailure] it returns is
    reachable by the step relation, so the soundness theorems of
    [Soundness.v] hold for the extracted code; [run_complete] says that,
    given enough fuel, it returns whatever terminal state the relation
    reaches. Recursion may not terminate ([μP(x).P(x)]): [run] then reports
    [OOutOfFuel], never [OFailure]. *)

From Coq Require Import ZArith List Bool Arith.
From PyPM Require Import Syntax Subst Declarative Env Algorithmic.
Import ListNotations.

Inductive outcome :=
| OSuccess (Θ Φ : subst)
| OFailure
| OOutOfFuel.

Section Interpreter.
  Variable G : graph.
  Variable D : list pdef.

  Definition step_fn (st : state) : state :=
    match st with
    | Running Θ Φ nf stk [] => Success Θ Φ                             (* ST-SUCCESS *)
    | Running Θ Φ nf stk (AMatch p t ρ :: k) =>
        match p with
        | PVar x =>
            match vfind x (tenv ρ) with
            | None => backtrack nf stk                                 (* ST-MATCH-VAR-CONFLICT *)
            | Some s =>
                match lookup s Θ with
                | None => Running (extend s t Θ) Φ nf stk k            (* ST-MATCH-VAR-BIND *)
                | Some t' =>
                    if Nat.eqb t' t then Running Θ Φ nf stk k          (* ST-MATCH-VAR-BOUND *)
                    else backtrack nf stk                              (* ST-MATCH-VAR-CONFLICT *)
                end
            end
        | PApp f ps =>
            let ts := children G t in
            if Nat.eqb (label G t) f && Nat.eqb (length ps) (length ts)
            then Running Θ Φ nf stk (push_matches ps ts ρ k)           (* ST-MATCH-FUN *)
            else backtrack nf stk                                      (* ST-MATCH-FUN-CONFLICT *)
        | PAlt p1 p2 =>                                                (* ST-MATCH-ALT *)
            Running Θ Φ nf ((Θ, Φ, AMatch p2 t ρ :: k) :: stk) (AMatch p1 t ρ :: k)
        | PGuard p g =>                                                (* ST-MATCH-GUARD *)
            Running Θ Φ nf stk (AMatch p t ρ :: AGuard g ρ :: k)
        | PExists x p =>                                               (* ST-MATCH-EXISTS *)
            Running Θ Φ (S nf) stk (AMatch p t (env_add_t ρ x nf) :: ACheckName nf :: k)
        | PExistsF F p =>
            Running Θ Φ (S nf) stk (AMatch p t (env_add_f ρ F nf) :: ACheckFName nf :: k)
        | PConstr p p' x =>                                            (* ST-MATCH-MATCHCONSTR *)
            Running Θ Φ nf stk (AMatch p t ρ :: AMatchConstr p' x ρ :: k)
        | PFunVar F ps =>
            let ts := children G t in
            if negb (Nat.eqb (length ps) (length ts)) then backtrack nf stk
            else
              match vfind F (fenv ρ) with
              | None => backtrack nf stk                               (* ST-MATCH-FUN-VAR-CONFLICT *)
              | Some s =>
                  match lookup s Φ with
                  | None =>                                            (* ST-MATCH-FUN-VAR-BIND *)
                      Running Θ (extend s (label G t) Φ) nf stk (push_matches ps ts ρ k)
                  | Some f =>
                      if Nat.eqb f (label G t)
                      then Running Θ Φ nf stk (push_matches ps ts ρ k) (* ST-MATCH-FUN-VAR-BOUND *)
                      else backtrack nf stk                            (* ST-MATCH-FUN-VAR-CONFLICT *)
                  end
              end
        | PCall P xs Fs =>
            match nth_error D P with
            | Some d =>
                if Nat.eqb (length xs) (nparams d) && Nat.eqb (length Fs) (nfparams d)
                then Running Θ Φ nf stk (AMatch (body d) t (call_env ρ xs Fs) :: k) (* ST-MATCH-MU *)
                else backtrack nf stk
            | None => backtrack nf stk
            end
        end
    | Running Θ Φ nf stk (AGuard g ρ :: k) =>
        match eval_guard G (tsub Θ ρ) (fsub Φ ρ) g with
        | Some true => Running Θ Φ nf stk k                            (* ST-CHECKGUARD-CONTINUE *)
        | _ => backtrack nf stk                                        (* ST-CHECKGUARD-BACKTRACK *)
        end
    | Running Θ Φ nf stk (ACheckName s :: k) =>
        match lookup s Θ with
        | Some _ => Running Θ Φ nf stk k                               (* ST-CHECKNAME *)
        | None => backtrack nf stk
        end
    | Running Θ Φ nf stk (ACheckFName s :: k) =>
        match lookup s Φ with
        | Some _ => Running Θ Φ nf stk k
        | None => backtrack nf stk
        end
    | Running Θ Φ nf stk (AMatchConstr p x ρ :: k) =>
        match tsub Θ ρ x with
        | Some t => Running Θ Φ nf stk (AMatch p t ρ :: k)             (* ST-MATCHCONSTR *)
        | None => backtrack nf stk
        end
    | st => st
    end.

  (** [step_fn] takes a step of the relation from every running state. *)
  Lemma step_fn_step : forall Θ Φ nf stk k,
    step G D (Running Θ Φ nf stk k) (step_fn (Running Θ Φ nf stk k)).
  Proof.
    intros Θ Φ nf stk k. destruct k as [|a k]; [apply ST_Success|].
    destruct a as [p t ρ|g ρ|s|s|p x ρ]; simpl.
    - destruct p as [x|f ps|p1 p2|p g|x p|F p|p p' x|F ps|P xs Fs].
      + destruct (vfind x (tenv ρ)) as [s|] eqn:Hx.
        * destruct (lookup s Θ) as [t'|] eqn:Hs.
          -- destruct (Nat.eqb t' t) eqn:He.
             ++ apply Nat.eqb_eq in He. subst. apply ST_Match_Var_Bound.
                unfold tsub, gsub. rewrite Hx. exact Hs.
             ++ apply Nat.eqb_neq in He. apply ST_Match_Var_Conflict.
                right. exists t'. unfold tsub, gsub. rewrite Hx. auto.
          -- eapply ST_Match_Var_Bind; eauto.
        * apply ST_Match_Var_Conflict. auto.
      + destruct (Nat.eqb (label G t) f) eqn:Hf;
          destruct (Nat.eqb (length ps) (length (children G t))) eqn:Hl; simpl.
        * apply Nat.eqb_eq in Hf, Hl. apply ST_Match_Fun; auto.
        * apply Nat.eqb_neq in Hl. apply ST_Match_Fun_Conflict. auto.
        * apply Nat.eqb_neq in Hf. apply ST_Match_Fun_Conflict. auto.
        * apply Nat.eqb_neq in Hf. apply ST_Match_Fun_Conflict. auto.
      + apply ST_Match_Alt.
      + apply ST_Match_Guard.
      + apply ST_Match_Exists.
      + apply ST_Match_ExistsF.
      + apply ST_Match_MatchConstr.
      + destruct (Nat.eqb (length ps) (length (children G t))) eqn:Hl; simpl.
        * apply Nat.eqb_eq in Hl.
          destruct (vfind F (fenv ρ)) as [s|] eqn:Hx.
          -- destruct (lookup s Φ) as [f|] eqn:Hs.
             ++ destruct (Nat.eqb f (label G t)) eqn:He.
                ** apply Nat.eqb_eq in He. subst. apply ST_Match_FunVar_Bound; auto.
                   unfold fsub, gsub. rewrite Hx. exact Hs.
                ** apply Nat.eqb_neq in He. apply ST_Match_FunVar_Conflict.
                   right. left. exists f. unfold fsub, gsub. rewrite Hx. auto.
             ++ eapply ST_Match_FunVar_Bind; eauto.
          -- apply ST_Match_FunVar_Conflict. auto.
        * apply Nat.eqb_neq in Hl. apply ST_Match_FunVar_Conflict. auto.
      + destruct (nth_error D P) as [d|] eqn:Hd.
        * destruct (Nat.eqb (length xs) (nparams d)) eqn:H1;
            destruct (Nat.eqb (length Fs) (nfparams d)) eqn:H2; simpl.
          -- apply Nat.eqb_eq in H1, H2. eapply ST_Match_Mu; eauto.
          -- apply ST_Match_Mu_Conflict. intros d' Hd'. rewrite Hd in Hd'.
             inversion Hd'; subst. apply Nat.eqb_neq in H2. auto.
          -- apply ST_Match_Mu_Conflict. intros d' Hd'. rewrite Hd in Hd'.
             inversion Hd'; subst. apply Nat.eqb_neq in H1. auto.
          -- apply ST_Match_Mu_Conflict. intros d' Hd'. rewrite Hd in Hd'.
             inversion Hd'; subst. apply Nat.eqb_neq in H1. auto.
        * apply ST_Match_Mu_Conflict. intros d' Hd'. congruence.
    - destruct (eval_guard G (tsub Θ ρ) (fsub Φ ρ) g) as [[|]|] eqn:Hg.
      + apply ST_CheckGuard_Continue. exact Hg.
      + apply ST_CheckGuard_Backtrack. congruence.
      + apply ST_CheckGuard_Backtrack. congruence.
    - destruct (lookup s Θ) eqn:Hs.
      + apply ST_CheckName. congruence.
      + apply ST_CheckName_Backtrack. exact Hs.
    - destruct (lookup s Φ) eqn:Hs.
      + apply ST_CheckFName. congruence.
      + apply ST_CheckFName_Backtrack. exact Hs.
    - destruct (tsub Θ ρ x) eqn:Hx.
      + apply ST_MatchConstr. exact Hx.
      + apply ST_MatchConstr_Backtrack. exact Hx.
  Qed.

  (** The relation is deterministic and [step_fn] is exactly it. *)
  Lemma step_deterministic_fn : forall st st',
    step G D st st' -> step_fn st = st'.
  Proof.
    intros st st' H. destruct H; simpl; auto; unfold tsub, fsub, gsub in *.
    - rewrite H, H0. reflexivity.
    - destruct (vfind x (tenv ρ)) eqn:Hx; [|discriminate].
      rewrite H, Nat.eqb_refl. reflexivity.
    - destruct H as [H|[t' [H1 H2]]].
      + rewrite H. reflexivity.
      + destruct (vfind x (tenv ρ)) eqn:Hx; [|discriminate].
        rewrite H1. apply Nat.eqb_neq in H2. rewrite H2. reflexivity.
    - rewrite H, H0, !Nat.eqb_refl. reflexivity.
    - destruct H as [H|H].
      + apply Nat.eqb_neq in H. rewrite H. reflexivity.
      + apply Nat.eqb_neq in H. rewrite H, andb_false_r. reflexivity.
    - rewrite H. reflexivity.
    - destruct (eval_guard G _ _ g) as [[|]|]; congruence.
    - destruct (lookup s Θ); congruence.
    - rewrite H. reflexivity.
    - destruct (lookup s Φ); congruence.
    - rewrite H. reflexivity.
    - rewrite H. reflexivity.
    - rewrite H. reflexivity.
    - rewrite H1, Nat.eqb_refl. simpl. rewrite H, H0. reflexivity.
    - rewrite H0, Nat.eqb_refl. simpl.
      destruct (vfind F (fenv ρ)) eqn:Hx; [|discriminate].
      rewrite H, Nat.eqb_refl. reflexivity.
    - destruct H as [H|[[f [H1 H2]]|H]].
      + destruct (Nat.eqb (length ps) (length (children G t))); simpl; auto.
        rewrite H. reflexivity.
      + destruct (Nat.eqb (length ps) (length (children G t))); simpl; auto.
        destruct (vfind F (fenv ρ)) eqn:Hx; [|discriminate].
        rewrite H1. apply Nat.eqb_neq in H2. rewrite H2. reflexivity.
      + apply Nat.eqb_neq in H. rewrite H. reflexivity.
    - rewrite H, H0, H1, !Nat.eqb_refl. reflexivity.
    - destruct (nth_error D P) as [d|] eqn:Hd; auto.
      destruct (H d eq_refl) as [H1|H1]; apply Nat.eqb_neq in H1; rewrite H1;
        [|rewrite andb_false_r]; reflexivity.
  Qed.

  Fixpoint run (fuel : nat) (st : state) : outcome :=
    match st with
    | Success Θ Φ => OSuccess Θ Φ
    | Failure => OFailure
    | Running _ _ _ _ _ =>
        match fuel with
        | O => OOutOfFuel
        | S n => run n (step_fn st)
        end
    end.

  (** The matcher called from OCaml. *)
  Definition match_pattern (fuel n m : nat) (p : pattern) (t : node) : outcome :=
    run fuel (init n m p t).

  (** Interpreter refinement: a success the function reports is reachable. *)
  Theorem run_refines_success : forall fuel st Θ Φ,
    run fuel st = OSuccess Θ Φ -> star G D st (Success Θ Φ).
  Proof.
    induction fuel as [|n IH]; intros st Θ Φ H; destruct st;
      simpl in H; try discriminate.
    - inversion H. apply star_refl.
    - eapply star_step; [apply step_fn_step | apply IH; exact H].
    - inversion H. apply star_refl.
  Qed.

  (** Interpreter refinement: a failure the function reports is reachable. *)
  Theorem run_refines_failure : forall fuel st,
    run fuel st = OFailure -> star G D st Failure.
  Proof.
    induction fuel as [|n IH]; intros st H; destruct st;
      simpl in H; try discriminate.
    - apply star_refl.
    - eapply star_step; [apply step_fn_step | apply IH; exact H].
    - apply star_refl.
  Qed.

  (** Completeness for enough fuel: the terminal state the relation reaches
      is what [run] returns, given enough fuel. *)
  Theorem run_complete : forall st st',
    star G D st st' ->
    (forall Θ Φ, st' = Success Θ Φ -> exists fuel, run fuel st = OSuccess Θ Φ) /\
    (st' = Failure -> exists fuel, run fuel st = OFailure).
  Proof.
    intros st st' H. induction H as [st|st st1 st2 Hs _ [IHs IHf]].
    - split.
      + intros Θ Φ ->. exists 0. reflexivity.
      + intros ->. exists 0. reflexivity.
    - apply step_deterministic_fn in Hs as Hfn.
      assert (Hrun : exists Θ Φ nf stk k, st = Running Θ Φ nf stk k)
        by (destruct Hs; eauto 7).
      destruct Hrun as (Θ0 & Φ0 & nf & stk & k & ->).
      split.
      + intros Θ Φ Heq. destruct (IHs Θ Φ Heq) as [fuel Hf].
        exists (S fuel). cbn [run]. rewrite Hfn. exact Hf.
      + intros Heq. destruct (IHf Heq) as [fuel Hf].
        exists (S fuel). cbn [run]. rewrite Hfn. exact Hf.
  Qed.

  (** More fuel never changes a result already reached. *)
  Lemma run_mono : forall fuel fuel' st o,
    fuel <= fuel' -> run fuel st = o -> o <> OOutOfFuel -> run fuel' st = o.
  Proof.
    induction fuel as [|n IH]; intros fuel' st o Hle H Ho;
      (destruct st; [| destruct fuel'; simpl in *; subst; reflexivity ..]).
    - simpl in H. subst. congruence.
    - destruct fuel' as [|n']; [inversion Hle|].
      cbn [run] in *. apply IH; auto. apply le_S_n. exact Hle.
  Qed.
  (** [n] steps of the relation. *)
  Inductive steps : nat -> state -> state -> Prop :=
  | steps_0 : forall st, steps 0 st st
  | steps_S : forall n st st' st'', step G D st st' -> steps n st' st'' -> steps (S n) st st''.

  (** What [OOutOfFuel] means: after exactly [fuel] steps the (deterministic)
      machine is still running. It is never a disguised failure. *)
  Theorem run_out_of_fuel : forall fuel st,
    run fuel st = OOutOfFuel ->
    exists Θ Φ nf stk k, steps fuel st (Running Θ Φ nf stk k).
  Proof.
    induction fuel as [|n IH]; intros st H; destruct st as [Θ Φ nf stk k| |];
      simpl in H; try discriminate.
    - exists Θ, Φ, nf, stk, k. apply steps_0.
    - destruct (IH _ H) as (Θ' & Φ' & nf' & stk' & k' & Hs).
      exists Θ', Φ', nf', stk', k'. eapply steps_S; [apply step_fn_step | exact Hs].
  Qed.
End Interpreter.
