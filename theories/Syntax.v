(** * Syntax: terms, guards and patterns of CorePyPM

    The paper (Cutler et al., CGO'25) matches patterns against *terms*
    [f(t1..tn)] (its Figures 5 and 15). A real compiler matches against a
    *graph* of operators in which one value feeds several consumers, so here
    a term is a node id of an abstract graph given by [label] and
    [children]. The Python importer hash-conses graphs, so node identity
    coincides with structural equality of the terms the nodes unfold to,
    and "t = t'" below is equality of node ids. *)

From Coq Require Import ZArith List Bool Arith.
Import ListNotations.

Definition node := nat.       (** a term: a node of the graph *)
Definition symbol := nat.     (** an operator f ∈ Σ (constants are 0-ary symbols) *)
Definition var := nat.        (** a term variable x *)
Definition fvar := nat.       (** a function (operator) variable F, §3.4 *)
Definition pname := nat.      (** the name P of a recursive pattern, §3.5 *)
Definition attribute := nat.  (** an attribute α ∈ 𝒜 (rank, dtype, shape[i], …) *)

(** The graph: [label] and [children] give the term [label t (children t)];
    [attr α t] is the paper's ⟦α⟧(t) of §3.2, [None] when the importer could
    not determine it (e.g. a symbolic size): guards reading it are not true.
    [sym_attr α f] is an attribute of an operator, such as its class, read
    by guards on function variables ([UnaryOp.op_class == …]). *)
Record graph := mkGraph {
  label : node -> symbol;
  children : node -> list node;
  attr : attribute -> node -> option Z;
  sym_attr : attribute -> symbol -> option Z
}.

(** Figure 15: [e ::= x.α | e + e | e - e | …], plus constants and [F.α]. *)
Inductive expr :=
| EConst (z : Z)
| EAttr (x : var) (a : attribute)
| EFAttr (F : fvar) (a : attribute)
| EAdd (e1 e2 : expr)
| ESub (e1 e2 : expr)
| EMul (e1 e2 : expr).

(** Figure 15: [g ::= e = e' | e < e' | g ∧ g' | g ∨ g' | ¬g]. *)
Inductive guard :=
| GTrue
| GEq (e1 e2 : expr)
| GLt (e1 e2 : expr)
| GAnd (g1 g2 : guard)
| GOr (g1 g2 : guard)
| GNot (g : guard).

(** Figure 15. Two points the paper leaves open are made explicit:
    - [PExistsF F p] binds a *local* operator variable ([UnaryOp = pm.Op(1, 1)]
      inside a pattern body); the paper has [∃x.p] for term variables only.
    - Recursion: [μP(x1..xn)[y1..yn].p] is written as a call
      [PCall P [y1..yn] [G1..Gm]] of the definition [P] in a global table
      (see [pdef]) whose parameters are the variables [0..n-1] (term) and
      [0..m-1] (operator) of its body. Calls pass variables, as
      [μP(x)[y]] does. Unfolding a call matches the body in a fresh scope in
      which the parameters alias the arguments and the body's local
      variables ([∃]) are new at every unfolding. *)
Inductive pattern :=
| PVar (x : var)                                   (* x *)
| PApp (f : symbol) (ps : list pattern)            (* f(p1..pn) *)
| PAlt (p1 p2 : pattern)                           (* p ‖ p' *)
| PGuard (p : pattern) (g : guard)                 (* p ; guard(g) *)
| PExists (x : var) (p : pattern)                  (* ∃x.p *)
| PExistsF (F : fvar) (p : pattern)                (* ∃F.p *)
| PConstr (p p' : pattern) (x : var)               (* p ; (p' ≈ x) *)
| PFunVar (F : fvar) (ps : list pattern)           (* F(p1..pn) *)
| PCall (P : pname) (xs : list var) (Fs : list fvar). (* P(x1..xn) *)

(** A pattern definition: [μP(0..n-1)[…].body]. [pbinds]/[pfbinds] list the
    parameters every match of the body binds (checked by [wf_defs]); they
    let well-formedness see through calls. *)
Record pdef := mkDef {
  nparams : nat;
  nfparams : nat;
  body : pattern;
  pbinds : list var;
  pfbinds : list fvar
}.

(** ** Free variables of guards *)

Fixpoint expr_vars (e : expr) : list var :=
  match e with
  | EConst _ | EFAttr _ _ => []
  | EAttr x _ => [x]
  | EAdd e1 e2 | ESub e1 e2 | EMul e1 e2 => expr_vars e1 ++ expr_vars e2
  end.

Fixpoint expr_fvars (e : expr) : list fvar :=
  match e with
  | EConst _ | EAttr _ _ => []
  | EFAttr F _ => [F]
  | EAdd e1 e2 | ESub e1 e2 | EMul e1 e2 => expr_fvars e1 ++ expr_fvars e2
  end.

Fixpoint guard_vars (g : guard) : list var :=
  match g with
  | GTrue => []
  | GEq e1 e2 | GLt e1 e2 => expr_vars e1 ++ expr_vars e2
  | GAnd g1 g2 | GOr g1 g2 => guard_vars g1 ++ guard_vars g2
  | GNot g => guard_vars g
  end.

Fixpoint guard_fvars (g : guard) : list fvar :=
  match g with
  | GTrue => []
  | GEq e1 e2 | GLt e1 e2 => expr_fvars e1 ++ expr_fvars e2
  | GAnd g1 g2 | GOr g1 g2 => guard_fvars g1 ++ guard_fvars g2
  | GNot g => guard_fvars g
  end.

Definition memb (x : nat) (l : list nat) : bool := existsb (Nat.eqb x) l.

Lemma memb_In : forall x l, memb x l = true <-> In x l.
Proof.
  intros x l. unfold memb. rewrite existsb_exists. split.
  - intros [y [Hy Heq]]. apply Nat.eqb_eq in Heq. subst. exact Hy.
  - intros H. exists x. split; [exact H | apply Nat.eqb_refl].
Qed.

Definition inter (l1 l2 : list nat) : list nat := filter (fun x => memb x l2) l1.
Definition remove_var (x : nat) (l : list nat) : list nat :=
  filter (fun y => negb (Nat.eqb x y)) l.

Lemma In_inter : forall x l1 l2, In x (inter l1 l2) -> In x l1 /\ In x l2.
Proof.
  intros x l1 l2 H. unfold inter in H. apply filter_In in H.
  destruct H as [H1 H2]. apply memb_In in H2. auto.
Qed.

Lemma In_remove_var : forall x y l, In y (remove_var x l) -> In y l /\ x <> y.
Proof.
  intros x y l H. unfold remove_var in H. apply filter_In in H.
  destruct H as [H1 H2]. apply negb_true_iff, Nat.eqb_neq in H2. auto.
Qed.

(** The [i]-th argument of a call, for the parameters in [l]. *)
Definition args_of (l : list nat) (xs : list nat) : list nat :=
  flat_map (fun i => match nth_error xs i with Some x => [x] | None => [] end) l.

Lemma In_args_of : forall y l xs,
  In y (args_of l xs) -> exists i, In i l /\ nth_error xs i = Some y.
Proof.
  intros y l xs H. unfold args_of in H. apply in_flat_map in H.
  destruct H as [i [Hi Hy]]. destruct (nth_error xs i) eqn:E; [|destruct Hy].
  destruct Hy as [<-|[]]. eauto.
Qed.

Section Binds.
  Variable D : list pdef.

  (** Term variables bound by every successful match of a pattern. *)
  Fixpoint binds (p : pattern) : list var :=
    match p with
    | PVar x => [x]
    | PApp _ ps | PFunVar _ ps => flat_map binds ps
    | PAlt p1 p2 => inter (binds p1) (binds p2)
    | PGuard p _ | PExistsF _ p => binds p
    | PExists x p => remove_var x (binds p)
    | PConstr p p' _ => binds p ++ binds p'
    | PCall P xs _ =>
        match nth_error D P with
        | Some d => args_of (pbinds d) xs
        | None => []
        end
    end.

  (** Operator variables bound by every successful match of a pattern. *)
  Fixpoint fbinds (p : pattern) : list fvar :=
    match p with
    | PVar _ => []
    | PApp _ ps => flat_map fbinds ps
    | PFunVar F ps => F :: flat_map fbinds ps
    | PAlt p1 p2 => inter (fbinds p1) (fbinds p2)
    | PGuard p _ | PExists _ p => fbinds p
    | PExistsF F p => remove_var F (fbinds p)
    | PConstr p p' _ => fbinds p ++ fbinds p'
    | PCall P _ Fs =>
        match nth_error D P with
        | Some d => args_of (pfbinds d) Fs
        | None => []
        end
    end.

  Definition subset (l1 l2 : list nat) : bool := forallb (fun x => memb x l2) l1.

  (** Scope: every variable a pattern reads ([PVar], a guard, a match
      constraint, the arguments of a call, an operator [F(..)]) is in scope:
      [sv x] / [sf F] (the parameters), or bound by an enclosing [∃]. A
      body reading a variable out of scope could only match under a
      substitution binding more than the parameters. *)
  Fixpoint scoped (sv : var -> bool) (sf : fvar -> bool) (p : pattern) : bool :=
    match p with
    | PVar x => sv x
    | PApp _ ps => forallb (scoped sv sf) ps
    | PFunVar F ps => sf F && forallb (scoped sv sf) ps
    | PAlt p1 p2 => scoped sv sf p1 && scoped sv sf p2
    | PGuard p g =>
        scoped sv sf p && forallb sv (guard_vars g) && forallb sf (guard_fvars g)
    | PExists x p => scoped (fun y => Nat.eqb y x || sv y) sf p
    | PExistsF F p => scoped sv (fun F' => Nat.eqb F' F || sf F') p
    | PConstr p p' x => scoped sv sf p && scoped sv sf p' && sv x
    | PCall _ xs Fs => forallb sv xs && forallb sf Fs
    end.

  (** A definition's body reads its parameters [0..nparams-1] (term) and
      [0..nfparams-1] (operator) and its own [∃] variables only. *)
  Definition scoped_def (d : pdef) : bool :=
    scoped (fun x => Nat.ltb x (nparams d)) (fun F => Nat.ltb F (nfparams d)) (body d).

  (** Well-formedness: a guard reads only variables its pattern binds; an
      [∃x.p] binds [x] in [p] (else Figure 17's [checkName(x)] would fail
      where the declarative rule P-EXISTS invents a witness); a match
      constraint [p ; (p' ≈ x)] has [x] bound by [p]. Without these the
      algorithm of Figures 7, 17 and 18 could backtrack on a guard, name or
      constraint that the final substitution satisfies, and failure
      soundness would not hold. The frontend reports a violation as a
      [PatternError]; the decoder rejects it (and a definition that is not
      [scoped_def], see [wf_def]). *)
  Fixpoint wfb (p : pattern) : bool :=
    match p with
    | PVar _ | PCall _ _ _ => true
    | PApp _ ps | PFunVar _ ps => forallb wfb ps
    | PAlt p1 p2 => wfb p1 && wfb p2
    | PGuard p g =>
        wfb p && subset (guard_vars g) (binds p) && subset (guard_fvars g) (fbinds p)
    | PExists x p => wfb p && memb x (binds p)
    | PExistsF F p => wfb p && memb F (fbinds p)
    | PConstr p p' x => wfb p && wfb p' && memb x (binds p)
    end.

  (** Every definition is well formed, binds the parameters it claims, and
      is scoped ([scoped_def]). *)
  Definition wf_def (d : pdef) : bool :=
    wfb (body d) && subset (pbinds d) (binds (body d))
    && subset (pfbinds d) (fbinds (body d)) && scoped_def d.

  Definition wf_defs : bool := forallb wf_def D.
End Binds.

Lemma subset_In : forall l1 l2, subset l1 l2 = true -> forall x, In x l1 -> In x l2.
Proof.
  intros l1 l2 H x Hx. unfold subset in H. rewrite forallb_forall in H.
  apply memb_In. auto.
Qed.

(** Nested induction principle for patterns (the generated one gives no
    hypothesis for the arguments of [PApp] and [PFunVar]). *)
Section PatternInd.
  Variable P : pattern -> Prop.
  Variable HVar : forall x, P (PVar x).
  Variable HApp : forall f ps, Forall P ps -> P (PApp f ps).
  Variable HAlt : forall p1 p2, P p1 -> P p2 -> P (PAlt p1 p2).
  Variable HGuard : forall p g, P p -> P (PGuard p g).
  Variable HExists : forall x p, P p -> P (PExists x p).
  Variable HExistsF : forall F p, P p -> P (PExistsF F p).
  Variable HConstr : forall p p' x, P p -> P p' -> P (PConstr p p' x).
  Variable HFunVar : forall F ps, Forall P ps -> P (PFunVar F ps).
  Variable HCall : forall Q xs Fs, P (PCall Q xs Fs).

  Fixpoint pattern_ind' (p : pattern) : P p :=
    let fix go (l : list pattern) : Forall P l :=
        match l with
        | [] => Forall_nil P
        | q :: l' => Forall_cons q (pattern_ind' q) (go l')
        end in
    match p with
    | PVar x => HVar x
    | PApp f ps => HApp f ps (go ps)
    | PAlt p1 p2 => HAlt p1 p2 (pattern_ind' p1) (pattern_ind' p2)
    | PGuard p g => HGuard p g (pattern_ind' p)
    | PExists x p => HExists x p (pattern_ind' p)
    | PExistsF F p => HExistsF F p (pattern_ind' p)
    | PConstr p p' x => HConstr p p' x (pattern_ind' p) (pattern_ind' p')
    | PFunVar F ps => HFunVar F ps (go ps)
    | PCall Q xs Fs => HCall Q xs Fs
    end.
End PatternInd.
