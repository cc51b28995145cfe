(** * Syntax: terms, guards and patterns of CorePyPM

    The paper (Cutler et al., CGO'25) matches patterns against *terms*
    [f(t1..tn)] (its Figure 5). A real compiler matches against a *graph* of
    operators in which one value feeds several consumers, so here a term is a
    node id of an abstract graph given by [label] and [children]. The Python
    importer hash-conses graphs, so node identity coincides with structural
    equality of the terms the nodes unfold to, and "t = t'" below is equality
    of node ids. *)

From Coq Require Import ZArith List Bool Arith.
Import ListNotations.

Definition node := nat.       (** a term: a node of the graph *)
Definition symbol := nat.     (** an operator f ∈ Σ (constants are 0-ary symbols) *)
Definition var := nat.        (** a pattern variable x *)
Definition attribute := nat.  (** an attribute α ∈ 𝒜 (rank, dtype, shape[i], …) *)

(** The graph: label and children give the term [label t (children t)];
    [attr α t] is the paper's ⟦α⟧(t) of §3.2, [None] when the importer could
    not determine it (e.g. a symbolic size): guards reading it are not true. *)
Record graph := mkGraph {
  label : node -> symbol;
  children : node -> list node;
  attr : attribute -> node -> option Z
}.

(** Figure 8: arithmetic expressions [e ::= x.α | e + e | e - e | …].
    The paper also allows [t.α] for a closed term; after substitution
    [g[θ]] every [x.α] is such a [t.α], which is how [Declarative.eval_expr]
    reads them. Constants are added for guards such as [x.rank = 2]. *)
Inductive expr :=
| EConst (z : Z)
| EAttr (x : var) (a : attribute)
| EAdd (e1 e2 : expr)
| ESub (e1 e2 : expr)
| EMul (e1 e2 : expr).

(** Figure 8: guards [g ::= e = e' | e < e' | g ∧ g' | g ∨ g' | ¬g]. *)
Inductive guard :=
| GTrue
| GEq (e1 e2 : expr)
| GLt (e1 e2 : expr)
| GAnd (g1 g2 : guard)
| GOr (g1 g2 : guard)
| GNot (g : guard).

(** Figures 5 and 8: [p ::= x | f(p1..pn) | p ‖ p' | p ; guard(g)]. *)
Inductive pattern :=
| PVar (x : var)
| PApp (f : symbol) (ps : list pattern)
| PAlt (p1 p2 : pattern)
| PGuard (p : pattern) (g : guard).

(** ** Well-formedness

    A guard may only read variables that the guarded pattern binds on every
    alternate. Figure 7's [guard(g)] action evaluates [g] under the
    substitution built so far; if [g] read a variable bound only later, the
    algorithm could backtrack on a guard the final substitution satisfies,
    and failure soundness would not hold. The Python frontend reports such a
    pattern as an error, and the decoder rejects it using [wfb] below. *)

Fixpoint expr_vars (e : expr) : list var :=
  match e with
  | EConst _ => []
  | EAttr x _ => [x]
  | EAdd e1 e2 | ESub e1 e2 | EMul e1 e2 => expr_vars e1 ++ expr_vars e2
  end.

Fixpoint guard_vars (g : guard) : list var :=
  match g with
  | GTrue => []
  | GEq e1 e2 | GLt e1 e2 => expr_vars e1 ++ expr_vars e2
  | GAnd g1 g2 | GOr g1 g2 => guard_vars g1 ++ guard_vars g2
  | GNot g => guard_vars g
  end.

Definition memb (x : var) (l : list var) : bool := existsb (Nat.eqb x) l.

(** Variables bound by every successful match of a pattern. *)
Fixpoint binds (p : pattern) : list var :=
  match p with
  | PVar x => [x]
  | PApp _ ps => flat_map binds ps
  | PAlt p1 p2 => filter (fun x => memb x (binds p2)) (binds p1)
  | PGuard p _ => binds p
  end.

Fixpoint wfb (p : pattern) : bool :=
  match p with
  | PVar _ => true
  | PApp _ ps => forallb wfb ps
  | PAlt p1 p2 => wfb p1 && wfb p2
  | PGuard p g => wfb p && forallb (fun x => memb x (binds p)) (guard_vars g)
  end.

Lemma memb_In : forall x l, memb x l = true <-> In x l.
Proof.
  intros x l. unfold memb. rewrite existsb_exists. split.
  - intros [y [Hy Heq]]. apply Nat.eqb_eq in Heq. subst. exact Hy.
  - intros H. exists x. split; [exact H | apply Nat.eqb_refl].
Qed.

Lemma In_binds_alt : forall x p1 p2,
  In x (binds (PAlt p1 p2)) -> In x (binds p1) /\ In x (binds p2).
Proof.
  intros x p1 p2 H. simpl in H. apply filter_In in H.
  destruct H as [H1 H2]. apply memb_In in H2. auto.
Qed.

(** Nested induction principle for patterns (the generated one gives no
    hypothesis for the arguments of [PApp]). *)
Section PatternInd.
  Variable P : pattern -> Prop.
  Variable HVar : forall x, P (PVar x).
  Variable HApp : forall f ps, Forall P ps -> P (PApp f ps).
  Variable HAlt : forall p1 p2, P p1 -> P p2 -> P (PAlt p1 p2).
  Variable HGuard : forall p g, P p -> P (PGuard p g).

  Fixpoint pattern_ind' (p : pattern) : P p :=
    match p with
    | PVar x => HVar x
    | PApp f ps =>
        HApp f ps
          ((fix go (l : list pattern) : Forall P l :=
              match l with
              | [] => Forall_nil P
              | q :: l' => Forall_cons q (pattern_ind' q) (go l')
              end) ps)
    | PAlt p1 p2 => HAlt p1 p2 (pattern_ind' p1) (pattern_ind' p2)
    | PGuard p g => HGuard p g (pattern_ind' p)
    end.
End PatternInd.
