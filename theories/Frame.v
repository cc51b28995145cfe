(** * The frame of a match: what a derivation reads of the graph

    A declarative match (Figure 16, [Declarative.matches]) reads the graph
    at a finite set of nodes only: the label and children of each node an
    operator pattern ([f(..)], [F(..)]) matches, and the attributes of the
    nodes a guard reads through the substitution; and the operators'
    attributes ([sym_attr]). [matches_frame]: every match has such a frame
    [R], and holds unchanged in any graph that agrees with the first on [R]
    and on the operators' attributes, whatever it has elsewhere.

    This is the locality a checker of a window of the graph needs (a
    certificate's match read in the window, not in the whole graph: the
    validator's cost, bench/results/matchers.md, "What the validator's 10 %
    needs, per firing"). *)

From Coq Require Import List Bool Arith ZArith.
From PyPM Require Import Syntax Subst Declarative.
Import ListNotations.

(** [G'] agrees with [G] at node [t]: the same label, children and
    attributes there. *)
Definition agree_at (G G' : graph) (t : node) : Prop :=
  label G' t = label G t /\ children G' t = children G t /\
  (forall a, attr G' a t = attr G a t).

(** The operators' attributes are the same. *)
Definition same_sym_attrs (G G' : graph) : Prop :=
  forall a f, sym_attr G' a f = sym_attr G a f.

(** The nodes a guard reads through [σ]. *)
Definition guard_nodes (σ : tsubst) (g : guard) : list node :=
  flat_map (fun x => match σ x with Some n => [n] | None => [] end) (guard_vars g).

Lemma eval_expr_agree : forall G G' σ ψ e,
  same_sym_attrs G G' ->
  (forall x n, In x (expr_vars e) -> σ x = Some n -> forall a, attr G' a n = attr G a n) ->
  eval_expr G' σ ψ e = eval_expr G σ ψ e.
Proof.
  intros G G' σ ψ e Hs Ha.
  induction e as [z|x a|F a|e1 IH1 e2 IH2|e1 IH1 e2 IH2|e1 IH1 e2 IH2]; simpl in *.
  - reflexivity.
  - destruct (σ x) as [n|] eqn:Ex; [|reflexivity]. apply (Ha x n); auto.
  - destruct (ψ F); [apply Hs | reflexivity].
  - rewrite IH1, IH2; auto; intros y n Hy; apply Ha; apply in_or_app; auto.
  - rewrite IH1, IH2; auto; intros y n Hy; apply Ha; apply in_or_app; auto.
  - rewrite IH1, IH2; auto; intros y n Hy; apply Ha; apply in_or_app; auto.
Qed.

Lemma eval_guard_agree : forall G G' σ ψ g,
  same_sym_attrs G G' ->
  (forall x n, In x (guard_vars g) -> σ x = Some n -> forall a, attr G' a n = attr G a n) ->
  eval_guard G' σ ψ g = eval_guard G σ ψ g.
Proof.
  intros G G' σ ψ g Hs Ha.
  induction g as [|e1 e2|e1 e2|g1 IH1 g2 IH2|g1 IH1 g2 IH2|g1 IH1]; simpl in *.
  - reflexivity.
  - rewrite !(eval_expr_agree G G' σ ψ) by
      (auto; intros y n Hy; apply Ha; apply in_or_app; auto). reflexivity.
  - rewrite !(eval_expr_agree G G' σ ψ) by
      (auto; intros y n Hy; apply Ha; apply in_or_app; auto). reflexivity.
  - rewrite IH1, IH2; auto; intros y n Hy; apply Ha; apply in_or_app; auto.
  - rewrite IH1, IH2; auto; intros y n Hy; apply Ha; apply in_or_app; auto.
  - rewrite IH1; auto.
Qed.

Lemma In_guard_nodes : forall σ g x n,
  In x (guard_vars g) -> σ x = Some n -> In n (guard_nodes σ g).
Proof.
  intros σ g x n Hx Hn. unfold guard_nodes. apply in_flat_map. exists x.
  rewrite Hn. simpl. auto.
Qed.

Section Frame.
  Variable G : graph.
  Variable D : list pdef.

  (** Agreement on a frame, for a graph [G']. *)
  Definition agrees_on (G' : graph) (R : list node) : Prop :=
    same_sym_attrs G G' /\ forall n, In n R -> agree_at G G' n.

  Lemma agrees_on_app_l : forall G' R1 R2, agrees_on G' (R1 ++ R2) -> agrees_on G' R1.
  Proof.
    intros G' R1 R2 [Hs H]. split; [exact Hs|]. intros n Hn. apply H, in_or_app. auto.
  Qed.

  Lemma agrees_on_app_r : forall G' R1 R2, agrees_on G' (R1 ++ R2) -> agrees_on G' R2.
  Proof.
    intros G' R1 R2 [Hs H]. split; [exact Hs|]. intros n Hn. apply H, in_or_app. auto.
  Qed.

  Lemma agrees_on_cons : forall G' t R, agrees_on G' (t :: R) -> agree_at G G' t /\ agrees_on G' R.
  Proof.
    intros G' t R [Hs H]. split; [apply H; left; reflexivity|].
    split; [exact Hs|]. intros n Hn. apply H. right. exact Hn.
  Qed.

  (** Every match has a frame: it holds in any graph agreeing with [G] on
      it (and on the operators' attributes). *)
  Theorem matches_frame : forall σ ψ p t,
    matches G D σ ψ p t ->
    exists R, forall G', agrees_on G' R -> matches G' D σ ψ p t.
  Proof.
    intros σ ψ p t H.
    induction H using matches_mut with
      (P0 := fun σ ψ ps ts _ =>
               exists R, forall G', agrees_on G' R -> matches_list G' D σ ψ ps ts).
    - (* P_Var *)
      exists []. intros G' _. constructor. exact e.
    - (* P_Fun *)
      destruct IHmatches as [R HR]. exists (t :: R). intros G' Ha.
      apply agrees_on_cons in Ha. destruct Ha as [[Hl [Hc _]] Ha].
      constructor; [rewrite Hl; exact e|]. rewrite Hc. apply HR, Ha.
    - (* P_Alt1 *)
      destruct IHmatches as [R HR]. exists R. intros G' Ha. apply P_Alt1. apply HR, Ha.
    - (* P_Alt2 *)
      destruct IHmatches as [R HR]. exists R. intros G' Ha. apply P_Alt2. apply HR, Ha.
    - (* P_Guard *)
      destruct IHmatches as [R HR]. exists (R ++ guard_nodes σ g). intros G' Ha.
      constructor; [apply HR; eapply agrees_on_app_l; eauto|].
      apply agrees_on_app_r in Ha. destruct Ha as [Hs Ha].
      rewrite (eval_guard_agree G G' σ ψ g Hs); [exact e|].
      intros x n Hx Hn. apply (Ha n (In_guard_nodes σ g x n Hx Hn)).
    - (* P_Exists *)
      destruct IHmatches as [R HR]. exists R. intros G' Ha. econstructor. apply HR, Ha.
    - (* P_ExistsF *)
      destruct IHmatches as [R HR]. exists R. intros G' Ha. econstructor. apply HR, Ha.
    - (* P_MatchConstr *)
      destruct IHmatches1 as [R1 H1], IHmatches2 as [R2 H2]. exists (R1 ++ R2). intros G' Ha.
      econstructor; [apply H1; eapply agrees_on_app_l; eauto | exact e |
                     apply H2; eapply agrees_on_app_r; eauto].
    - (* P_FunVar *)
      destruct IHmatches as [R HR]. exists (t :: R). intros G' Ha.
      apply agrees_on_cons in Ha. destruct Ha as [[Hl [Hc _]] Ha].
      constructor; [rewrite Hl; exact e|]. rewrite Hc. apply HR, Ha.
    - (* P_Mu *)
      destruct IHmatches as [R HR]. exists R. intros G' Ha. econstructor; eauto.
    - (* ML_Nil *)
      exists []. intros G' _. constructor.
    - (* ML_Cons *)
      match goal with
      | I1 : exists R, forall G', agrees_on G' R -> matches G' D _ _ _ _,
        I2 : exists R, forall G', agrees_on G' R -> matches_list G' D _ _ _ _ |- _ =>
          destruct I1 as [R1 H1]; destruct I2 as [R2 H2]
      end.
      exists (R1 ++ R2). intros G' Ha.
      constructor; [apply H1; eapply agrees_on_app_l; eauto |
                    apply H2; eapply agrees_on_app_r; eauto].
  Qed.
End Frame.
