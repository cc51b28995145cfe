(** * Substitutions θ: finite maps from variables to nodes

    The paper writes [θ(x) ↦ t] and [θ ∪ {x ↦ t}]. We realize θ, and every
    finite map over [nat] keys the development uses ([VarMap]), by the
    binary tries of Coq's standard library (FMapPositive) keyed by
    [k + 1] ([Pos.of_succ_nat]): a lookup or an insertion is [log k] steps
    over the binary digits of the key, with no comparison (association
    lists were measured quadratic: 5.6 s for 50k variables; the AVL trees
    of FMapAVL, used before, call the functor's comparison closure at every
    step and rebalance on insertion). Everything the proofs need about
    these maps is the four facts of [VarMapF]; everything they need about
    θ is stated here, as lemmas over [lookup]/[extend]. *)

From Coq Require Import Arith PArith FMapPositive.
From PyPM Require Import Syntax.

(** Maps over [nat] keys: [find], [add], [mem], [empty]. *)
Module VarMap.
  Definition t (A : Type) : Type := PositiveMap.t A.
  Definition key (k : nat) : positive := Pos.of_succ_nat k.
  Definition empty (A : Type) : t A := PositiveMap.empty A.
  Definition find {A : Type} (k : nat) (m : t A) : option A := PositiveMap.find (key k) m.
  Definition add {A : Type} (k : nat) (v : A) (m : t A) : t A := PositiveMap.add (key k) v m.
  Definition mem {A : Type} (k : nat) (m : t A) : bool := PositiveMap.mem (key k) m.
End VarMap.

(** What the proofs use of [VarMap] (the names of FMapFacts' facts). *)
Module VarMapF.
  Lemma key_inj : forall x y, VarMap.key x = VarMap.key y -> x = y.
  Proof. unfold VarMap.key. intros x y H. apply SuccNat2Pos.inj. exact H. Qed.

  Lemma empty_o : forall A (x : nat), VarMap.find x (VarMap.empty A) = None.
  Proof. intros. apply PositiveMap.gempty. Qed.

  Lemma add_eq_o : forall A (m : VarMap.t A) (x y : nat) (e : A),
    x = y -> VarMap.find y (VarMap.add x e m) = Some e.
  Proof. intros A m x y e <-. apply PositiveMap.gss. Qed.

  Lemma add_neq_o : forall A (m : VarMap.t A) (x y : nat) (e : A),
    x <> y -> VarMap.find y (VarMap.add x e m) = VarMap.find y m.
  Proof.
    intros A m x y e Hne. apply PositiveMap.gso.
    intros H. apply Hne. symmetry. apply key_inj. exact H.
  Qed.

  Lemma mem_find_b : forall A (m : VarMap.t A) (x : nat),
    VarMap.mem x m = match VarMap.find x m with Some _ => true | None => false end.
  Proof. intros. unfold VarMap.mem, VarMap.find. rewrite PositiveMap.mem_find. reflexivity. Qed.
End VarMapF.
Arguments VarMapF.empty_o {A} x.
Arguments VarMapF.add_eq_o {A} m x y e _.
Arguments VarMapF.add_neq_o {A} m x y e _.
Arguments VarMapF.mem_find_b {A} m x.

Definition subst := VarMap.t node.

(** [θ(x) ↦ t] is [lookup x θ = Some t]. *)
Definition lookup (x : var) (θ : subst) : option node := VarMap.find x θ.
(** [θ ∪ {x ↦ t}] (used only when [x] is unbound in [θ]). *)
Definition extend (x : var) (t : node) (θ : subst) : subst := VarMap.add x t θ.
(** The empty substitution [∅]. *)
Definition empty : subst := VarMap.empty node.

(** [θ ⊆ θ'] of Theorem 1. *)
Definition sub (θ θ' : subst) : Prop :=
  forall x t, lookup x θ = Some t -> lookup x θ' = Some t.

Definition bound (θ : subst) (x : var) : Prop := lookup x θ <> None.

Lemma lookup_empty : forall x, lookup x empty = None.
Proof. intros x. unfold lookup, empty. apply VarMapF.empty_o. Qed.

Lemma lookup_extend_eq : forall x t θ, lookup x (extend x t θ) = Some t.
Proof. intros. unfold lookup, extend. apply VarMapF.add_eq_o. reflexivity. Qed.

Lemma lookup_extend_neq : forall x y t θ,
  x <> y -> lookup y (extend x t θ) = lookup y θ.
Proof. intros. unfold lookup, extend. apply VarMapF.add_neq_o. exact H. Qed.

Lemma sub_refl : forall θ, sub θ θ.
Proof. unfold sub. auto. Qed.

Lemma sub_trans : forall θ1 θ2 θ3, sub θ1 θ2 -> sub θ2 θ3 -> sub θ1 θ3.
Proof. unfold sub. auto. Qed.

Lemma sub_empty : forall θ, sub empty θ.
Proof. unfold sub. intros θ x t H. rewrite lookup_empty in H. discriminate. Qed.

(** Extending with a fresh variable only grows the substitution. *)
Lemma sub_extend : forall x t θ, lookup x θ = None -> sub θ (extend x t θ).
Proof.
  unfold sub. intros x t θ Hx y u Hy.
  destruct (Nat.eq_dec x y) as [<-|Hne].
  - rewrite Hx in Hy. discriminate.
  - rewrite lookup_extend_neq by exact Hne. exact Hy.
Qed.

(** [θ ∪ {x ↦ t} ⊆ θ'] when [θ ⊆ θ'] and [θ'(x) ↦ t]. *)
Lemma extend_sub : forall x t θ θ',
  sub θ θ' -> lookup x θ' = Some t -> sub (extend x t θ) θ'.
Proof.
  unfold sub. intros x t θ θ' Hs Hx y u Hy.
  destruct (Nat.eq_dec x y) as [<-|Hne].
  - rewrite lookup_extend_eq in Hy. inversion Hy. subst. exact Hx.
  - rewrite lookup_extend_neq in Hy by exact Hne. auto.
Qed.

Lemma bound_extend : forall x t θ y, bound (extend x t θ) y <-> y = x \/ bound θ y.
Proof.
  unfold bound. intros x t θ y. destruct (Nat.eq_dec x y) as [<-|Hne].
  - rewrite lookup_extend_eq. split; [auto | discriminate].
  - rewrite lookup_extend_neq by exact Hne. split; [auto|].
    intros [->|H]; [congruence | exact H].
Qed.
