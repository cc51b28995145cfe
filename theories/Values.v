(** * Integer values: the range in which OCaml's [int] realizes [Z] exactly

    The extraction realizes [Z] by OCaml's 63-bit [int] (ExtrOcamlZInt),
    whose range is [[-2^62, 2^62 - 1]]. That realization is exact for an
    operation whose mathematical result lies in the range, and wrong
    otherwise (an overflow wraps around). This file states the precondition
    under which every [Z] operation the extracted matcher performs stays in
    the range, and proves it:

    - [value_ok z]: [|z| <= 2^62 - 1] (OCaml's range without [min_int]).
      The decoder checks every attribute value, symbol-attribute value and
      guard constant with the extracted [value_ok] (after converting the
      64-bit word to [int] exactly), so the precondition holds for every
      loaded graph and pattern set: [graph_values_ok], [defs_consts_ok].
    - [eval_expr_value_ok]: under it, every value an expression evaluates
      to is [value_ok];
    - [guard_arith_in_range]: every addition, subtraction and
      multiplication [eval_expr] performs has operands and result that are
      [value_ok] (it only computes after [in_bound] checked its operands);
    - the comparisons ([Z.eqb], [Z.ltb], [Z.leb]) and negations
      ([- add_bound], [- mul_bound], [- value_max]) the code performs are on
      [value_ok] numbers ([bounds_value_ok]).

    So no intermediate result of guard arithmetic leaves OCaml's range.
    [Z.abs] is not used (OCaml's [abs min_int] is negative). *)

From Coq Require Import ZArith List Bool Lia.
From PyPM Require Import Syntax Declarative.
Import ListNotations.

Open Scope Z_scope.

(** [2^62 - 1], OCaml's [max_int]. *)
Definition value_max : Z := 4611686018427387903.

Lemma value_max_pow : value_max = 2 ^ 62 - 1.
Proof. reflexivity. Qed.

(** The value-range check, extracted and called by the decoder. *)
Definition value_ok (z : Z) : bool := (- value_max <=? z) && (z <=? value_max).

Lemma value_ok_iff : forall z, value_ok z = true <-> - value_max <= z <= value_max.
Proof.
  intros z. unfold value_ok. rewrite andb_true_iff, !Z.leb_le. tauto.
Qed.

(** The precondition on a graph. *)
Definition graph_values_ok (G : graph) : Prop :=
  (forall a t v, attr G a t = Some v -> value_ok v = true) /\
  (forall a f v, sym_attr G a f = Some v -> value_ok v = true).

(** The precondition on patterns: every guard constant is [value_ok]. *)
Fixpoint expr_consts_ok (e : expr) : bool :=
  match e with
  | EConst z => value_ok z
  | EAttr _ _ | EFAttr _ _ => true
  | EAdd e1 e2 | ESub e1 e2 | EMul e1 e2 => expr_consts_ok e1 && expr_consts_ok e2
  end.

Fixpoint guard_consts_ok (g : guard) : bool :=
  match g with
  | GTrue => true
  | GEq e1 e2 | GLt e1 e2 => expr_consts_ok e1 && expr_consts_ok e2
  | GAnd g1 g2 | GOr g1 g2 => guard_consts_ok g1 && guard_consts_ok g2
  | GNot g => guard_consts_ok g
  end.

Fixpoint pattern_consts_ok (p : pattern) : bool :=
  match p with
  | PVar _ | PCall _ _ _ => true
  | PApp _ ps | PFunVar _ ps => forallb pattern_consts_ok ps
  | PAlt p1 p2 | PConstr p1 p2 _ => pattern_consts_ok p1 && pattern_consts_ok p2
  | PGuard p g => pattern_consts_ok p && guard_consts_ok g
  | PExists _ p | PExistsF _ p => pattern_consts_ok p
  end.

Definition defs_consts_ok (D : list pdef) : bool :=
  forallb (fun d => pattern_consts_ok (body d)) D.

(** The bounds and their negations are in range. *)
Lemma bounds_value_ok :
  value_ok add_bound = true /\ value_ok (- add_bound) = true /\
  value_ok mul_bound = true /\ value_ok (- mul_bound) = true /\
  value_ok value_max = true /\ value_ok (- value_max) = true.
Proof. repeat split; reflexivity. Qed.

(** The three operations of guard arithmetic, on operands that passed
    [in_bound], have results in range (and so have their operands). *)
Theorem guard_arith_in_range : forall x y,
  (in_bound add_bound x && in_bound add_bound y = true ->
   value_ok x = true /\ value_ok y = true /\
   value_ok (x + y) = true /\ value_ok (x - y) = true) /\
  (in_bound mul_bound x && in_bound mul_bound y = true ->
   value_ok x = true /\ value_ok y = true /\ value_ok (x * y) = true).
Proof.
  intros x y. rewrite !in_bound_abs, add_bound_pow, mul_bound_pow.
  split; intros H; apply andb_true_iff in H; destruct H as [Hx Hy];
    apply Z.ltb_lt in Hx, Hy; apply Z.abs_lt in Hx, Hy.
  - rewrite !value_ok_iff, value_max_pow. simpl in *. lia.
  - rewrite !value_ok_iff, value_max_pow. simpl in *.
    assert (Habs : Z.abs (x * y) <= 2147483647 * 2147483647).
    { rewrite Z.abs_mul. apply Z.mul_le_mono_nonneg; lia. }
    apply Z.abs_le in Habs. lia.
Qed.

Section Eval.
  Variable G : graph.

  (** Every value a guard expression evaluates to is in range. *)
  Theorem eval_expr_value_ok : graph_values_ok G ->
    forall σ ψ e v, expr_consts_ok e = true -> eval_expr G σ ψ e = Some v ->
    value_ok v = true.
  Proof.
    intros [Ha Hs] σ ψ e. induction e; intros v Hc H; simpl in *.
    - inversion H; subst. exact Hc.
    - destruct (σ x); [eapply Ha; eauto | discriminate].
    - destruct (ψ F); [eapply Hs; eauto | discriminate].
    - unfold option_map2 in H.
      destruct (eval_expr G σ ψ e1), (eval_expr G σ ψ e2); try discriminate.
      destruct (in_bound add_bound z && in_bound add_bound z0) eqn:B; try discriminate.
      inversion H; subst. apply (guard_arith_in_range z z0). exact B.
    - unfold option_map2 in H.
      destruct (eval_expr G σ ψ e1), (eval_expr G σ ψ e2); try discriminate.
      destruct (in_bound add_bound z && in_bound add_bound z0) eqn:B; try discriminate.
      inversion H; subst. apply (guard_arith_in_range z z0). exact B.
    - unfold option_map2 in H.
      destruct (eval_expr G σ ψ e1), (eval_expr G σ ψ e2); try discriminate.
      destruct (in_bound mul_bound z && in_bound mul_bound z0) eqn:B; try discriminate.
      inversion H; subst. apply (guard_arith_in_range z z0). exact B.
  Qed.
End Eval.
