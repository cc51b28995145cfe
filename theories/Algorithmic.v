(** * Algorithmic semantics: the backtracking state machine

    The paper's Figure 7 (basic patterns) and the guard rules of Figure 17:
    a small-step relation [st ↦ st'] over states
    [running(θ, stk, k) | success(θ) | failure]. *)

From Coq Require Import ZArith List Bool.
From PyPM Require Import Syntax Subst Declarative.
Import ListNotations.

(** Figure 7/17: [a ::= match(p, t) | guard(g)]. *)
Inductive action :=
| AMatch (p : pattern) (t : node)
| AGuard (g : guard).

(** [k ::= [] | a :: k] *)
Definition cont := list action.
(** [stk ::= [] | (θ, k) :: stk] *)
Definition frame := (subst * cont)%type.

(** [st ::= success(θ) | failure | running(θ, stk, k)] *)
Inductive state :=
| Running (θ : subst) (stk : list frame) (k : cont)
| Success (θ : subst)
| Failure.

(** [backtrack([]) = failure], [backtrack((θ, k) :: stk) = running(θ, stk, k)] *)
Definition backtrack (stk : list frame) : state :=
  match stk with
  | [] => Failure
  | (θ, k) :: stk' => Running θ stk' k
  end.

(** ST-MATCH-FUN's [k' = [match(p1, t1), …, match(pn, tn)]] prepended to
    [k], i.e. [k' ++ k], built in one pass. *)
Fixpoint push_matches (ps : list pattern) (ts : list node) (k : cont) : cont :=
  match ps, ts with
  | p :: ps', t :: ts' => AMatch p t :: push_matches ps' ts' k
  | _, _ => k
  end.

(** The initial state [running(∅, [], [match(p, t)])]. *)
Definition init (p : pattern) (t : node) : state :=
  Running empty [] [AMatch p t].

Section Step.
  Variable G : graph.

  Inductive step : state -> state -> Prop :=
  | ST_Success : forall θ stk,                                  (* ST-SUCCESS *)
      step (Running θ stk []) (Success θ)
  | ST_Match_Var_Bind : forall θ stk x t k,                     (* ST-MATCH-VAR-BIND *)
      lookup x θ = None ->
      step (Running θ stk (AMatch (PVar x) t :: k)) (Running (extend x t θ) stk k)
  | ST_Match_Var_Bound : forall θ stk x t k,                    (* ST-MATCH-VAR-BOUND *)
      lookup x θ = Some t ->
      step (Running θ stk (AMatch (PVar x) t :: k)) (Running θ stk k)
  | ST_Match_Var_Conflict : forall θ stk x t t' k,              (* ST-MATCH-VAR-CONFLICT *)
      lookup x θ = Some t' -> t' <> t ->
      step (Running θ stk (AMatch (PVar x) t :: k)) (backtrack stk)
  | ST_Match_Fun : forall θ stk f ps t k,                       (* ST-MATCH-FUN *)
      label G t = f -> length ps = length (children G t) ->
      step (Running θ stk (AMatch (PApp f ps) t :: k))
           (Running θ stk (push_matches ps (children G t) k))
  | ST_Match_Fun_Conflict : forall θ stk f ps t k,              (* ST-MATCH-FUN-CONFLICT *)
      label G t <> f \/ length ps <> length (children G t) ->
      step (Running θ stk (AMatch (PApp f ps) t :: k)) (backtrack stk)
  | ST_Match_Alt : forall θ stk p1 p2 t k,                      (* ST-MATCH-ALT *)
      step (Running θ stk (AMatch (PAlt p1 p2) t :: k))
           (Running θ ((θ, AMatch p2 t :: k) :: stk) (AMatch p1 t :: k))
  | ST_Match_Guard : forall θ stk p g t k,                      (* ST-MATCH-GUARD *)
      step (Running θ stk (AMatch (PGuard p g) t :: k))
           (Running θ stk (AMatch p t :: AGuard g :: k))
  | ST_CheckGuard_Continue : forall θ stk g k,                  (* ST-CHECKGUARD-CONTINUE *)
      eval_guard G θ g = Some true ->
      step (Running θ stk (AGuard g :: k)) (Running θ stk k)
  | ST_CheckGuard_Backtrack : forall θ stk g k,                 (* ST-CHECKGUARD-BACKTRACK *)
      eval_guard G θ g <> Some true ->
      step (Running θ stk (AGuard g :: k)) (backtrack stk).

  (** [↦*], the reflexive-transitive closure. *)
  Inductive star : state -> state -> Prop :=
  | star_refl : forall st, star st st
  | star_step : forall st st' st'', step st st' -> star st' st'' -> star st st''.
End Step.
