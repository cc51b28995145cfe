(** * Algorithmic semantics: the backtracking state machine

    The paper's Figures 7, 17 and 18: a small-step relation [st ↦ st'] over
    states [running(θ, φ, stk, k) | success(θ, φ) | failure]. The machine's
    substitutions are over slots; each action carries the environment [ρ]
    of its scope (see [Env.v]), and [nf] is the next fresh slot. *)

From Coq Require Import ZArith List Bool.
From PyPM Require Import Syntax Subst Declarative Env.
Import ListNotations.

(** Figure 17: [a ::= match(p, t) | guard(g) | checkName(x) | matchConstr(p, x)],
    plus [checkName] for operator variables. *)
Inductive action :=
| AMatch (p : pattern) (t : node) (ρ : env)
| AGuard (g : guard) (ρ : env)
| ACheckName (s : nat)
| ACheckFName (s : nat)
| AMatchConstr (p : pattern) (x : var) (ρ : env).

Definition cont := list action.
(** [stk ::= [] | (θ, φ, k) :: stk] *)
Definition frame := (subst * subst * cont)%type.

Inductive state :=
| Running (Θ Φ : subst) (nf : nat) (stk : list frame) (k : cont)
| Success (Θ Φ : subst)
| Failure.

(** [backtrack([]) = failure], [backtrack((θ, φ, k) :: stk) = running(θ, φ, stk, k)].
    The fresh-slot counter is not restored: slots are never reused. *)
Definition backtrack (nf : nat) (stk : list frame) : state :=
  match stk with
  | [] => Failure
  | (Θ, Φ, k) :: stk' => Running Θ Φ nf stk' k
  end.

(** ST-MATCH-FUN's [k' = [match(p1, t1), …, match(pn, tn)]] prepended to [k]. *)
Fixpoint push_matches (ps : list pattern) (ts : list node) (ρ : env) (k : cont) : cont :=
  match ps, ts with
  | p :: ps', t :: ts' => AMatch p t ρ :: push_matches ps' ts' ρ k
  | _, _ => k
  end.

(** The initial state [running(∅, ∅, [], [match(p, t)])] for a pattern whose
    variables are [0..n-1] (term) and [0..m-1] (operator). *)
Definition init (n m : nat) (p : pattern) (t : node) : state :=
  Running empty empty (max n m) [] [AMatch p t (mkEnv (ident_map n) (ident_map m))].

Section Step.
  Variable G : graph.
  Variable D : list pdef.

  Definition tsub (Θ : subst) (ρ : env) : tsubst := gsub Θ (tenv ρ).
  Definition fsub (Φ : subst) (ρ : env) : fsubst := gsub Φ (fenv ρ).

  Inductive step : state -> state -> Prop :=
  | ST_Success : forall Θ Φ nf stk,                                 (* ST-SUCCESS *)
      step (Running Θ Φ nf stk []) (Success Θ Φ)
  | ST_Match_Var_Bind : forall Θ Φ nf stk x t ρ s k,                (* ST-MATCH-VAR-BIND *)
      vfind x (tenv ρ) = Some s -> lookup s Θ = None ->
      step (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k))
           (Running (extend s t Θ) Φ nf stk k)
  | ST_Match_Var_Bound : forall Θ Φ nf stk x t ρ k,                 (* ST-MATCH-VAR-BOUND *)
      tsub Θ ρ x = Some t ->
      step (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)) (Running Θ Φ nf stk k)
  | ST_Match_Var_Conflict : forall Θ Φ nf stk x t ρ k,              (* ST-MATCH-VAR-CONFLICT *)
      (vfind x (tenv ρ) = None \/ exists t', tsub Θ ρ x = Some t' /\ t' <> t) ->
      step (Running Θ Φ nf stk (AMatch (PVar x) t ρ :: k)) (backtrack nf stk)
  | ST_Match_Fun : forall Θ Φ nf stk f ps t ρ k,                    (* ST-MATCH-FUN *)
      label G t = f -> length ps = length (children G t) ->
      step (Running Θ Φ nf stk (AMatch (PApp f ps) t ρ :: k))
           (Running Θ Φ nf stk (push_matches ps (children G t) ρ k))
  | ST_Match_Fun_Conflict : forall Θ Φ nf stk f ps t ρ k,           (* ST-MATCH-FUN-CONFLICT *)
      label G t <> f \/ length ps <> length (children G t) ->
      step (Running Θ Φ nf stk (AMatch (PApp f ps) t ρ :: k)) (backtrack nf stk)
  | ST_Match_Alt : forall Θ Φ nf stk p1 p2 t ρ k,                   (* ST-MATCH-ALT *)
      step (Running Θ Φ nf stk (AMatch (PAlt p1 p2) t ρ :: k))
           (Running Θ Φ nf ((Θ, Φ, AMatch p2 t ρ :: k) :: stk) (AMatch p1 t ρ :: k))
  | ST_Match_Guard : forall Θ Φ nf stk p g t ρ k,                   (* ST-MATCH-GUARD *)
      step (Running Θ Φ nf stk (AMatch (PGuard p g) t ρ :: k))
           (Running Θ Φ nf stk (AMatch p t ρ :: AGuard g ρ :: k))
  | ST_CheckGuard_Continue : forall Θ Φ nf stk g ρ k,               (* ST-CHECKGUARD-CONTINUE *)
      eval_guard G (tsub Θ ρ) (fsub Φ ρ) g = Some true ->
      step (Running Θ Φ nf stk (AGuard g ρ :: k)) (Running Θ Φ nf stk k)
  | ST_CheckGuard_Backtrack : forall Θ Φ nf stk g ρ k,              (* ST-CHECKGUARD-BACKTRACK *)
      eval_guard G (tsub Θ ρ) (fsub Φ ρ) g <> Some true ->
      step (Running Θ Φ nf stk (AGuard g ρ :: k)) (backtrack nf stk)
  | ST_Match_Exists : forall Θ Φ nf stk x p t ρ k,                  (* ST-MATCH-EXISTS *)
      step (Running Θ Φ nf stk (AMatch (PExists x p) t ρ :: k))
           (Running Θ Φ (S nf) stk (AMatch p t (env_add_t ρ x nf) :: ACheckName nf :: k))
  | ST_Match_ExistsF : forall Θ Φ nf stk F p t ρ k,                 (* ST-MATCH-EXISTS for ∃F *)
      step (Running Θ Φ nf stk (AMatch (PExistsF F p) t ρ :: k))
           (Running Θ Φ (S nf) stk (AMatch p t (env_add_f ρ F nf) :: ACheckFName nf :: k))
  | ST_CheckName : forall Θ Φ nf stk s k,                           (* ST-CHECKNAME *)
      lookup s Θ <> None ->
      step (Running Θ Φ nf stk (ACheckName s :: k)) (Running Θ Φ nf stk k)
  | ST_CheckName_Backtrack : forall Θ Φ nf stk s k,                 (* (not in the paper: no witness) *)
      lookup s Θ = None ->
      step (Running Θ Φ nf stk (ACheckName s :: k)) (backtrack nf stk)
  | ST_CheckFName : forall Θ Φ nf stk s k,
      lookup s Φ <> None ->
      step (Running Θ Φ nf stk (ACheckFName s :: k)) (Running Θ Φ nf stk k)
  | ST_CheckFName_Backtrack : forall Θ Φ nf stk s k,
      lookup s Φ = None ->
      step (Running Θ Φ nf stk (ACheckFName s :: k)) (backtrack nf stk)
  | ST_Match_MatchConstr : forall Θ Φ nf stk p p' x t ρ k,          (* ST-MATCH-MATCHCONSTR *)
      step (Running Θ Φ nf stk (AMatch (PConstr p p' x) t ρ :: k))
           (Running Θ Φ nf stk (AMatch p t ρ :: AMatchConstr p' x ρ :: k))
  | ST_MatchConstr : forall Θ Φ nf stk p x ρ t k,                   (* ST-MATCHCONSTR *)
      tsub Θ ρ x = Some t ->
      step (Running Θ Φ nf stk (AMatchConstr p x ρ :: k))
           (Running Θ Φ nf stk (AMatch p t ρ :: k))
  | ST_MatchConstr_Backtrack : forall Θ Φ nf stk p x ρ k,           (* (not in the paper: x unbound) *)
      tsub Θ ρ x = None ->
      step (Running Θ Φ nf stk (AMatchConstr p x ρ :: k)) (backtrack nf stk)
  | ST_Match_FunVar_Bind : forall Θ Φ nf stk F ps t ρ s k,          (* ST-MATCH-FUN-VAR-BIND *)
      vfind F (fenv ρ) = Some s -> lookup s Φ = None ->
      length ps = length (children G t) ->
      step (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k))
           (Running Θ (extend s (label G t) Φ) nf stk (push_matches ps (children G t) ρ k))
  | ST_Match_FunVar_Bound : forall Θ Φ nf stk F ps t ρ k,           (* ST-MATCH-FUN-VAR-BOUND *)
      fsub Φ ρ F = Some (label G t) -> length ps = length (children G t) ->
      step (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k))
           (Running Θ Φ nf stk (push_matches ps (children G t) ρ k))
  | ST_Match_FunVar_Conflict : forall Θ Φ nf stk F ps t ρ k,        (* ST-MATCH-FUN-VAR-CONFLICT *)
      (vfind F (fenv ρ) = None \/
       (exists f, fsub Φ ρ F = Some f /\ f <> label G t) \/
       length ps <> length (children G t)) ->
      step (Running Θ Φ nf stk (AMatch (PFunVar F ps) t ρ :: k)) (backtrack nf stk)
  | ST_Match_Mu : forall Θ Φ nf stk P xs Fs d t ρ k,                (* ST-MATCH-MU *)
      nth_error D P = Some d -> length xs = nparams d -> length Fs = nfparams d ->
      step (Running Θ Φ nf stk (AMatch (PCall P xs Fs) t ρ :: k))
           (Running Θ Φ nf stk (AMatch (body d) t (call_env ρ xs Fs) :: k))
  | ST_Match_Mu_Conflict : forall Θ Φ nf stk P xs Fs t ρ k,         (* (not in the paper: bad call) *)
      (forall d, nth_error D P = Some d ->
                 length xs <> nparams d \/ length Fs <> nfparams d) ->
      step (Running Θ Φ nf stk (AMatch (PCall P xs Fs) t ρ :: k)) (backtrack nf stk).

  (** [↦*], the reflexive-transitive closure. *)
  Inductive star : state -> state -> Prop :=
  | star_refl : forall st, star st st
  | star_step : forall st st' st'', step st st' -> star st' st'' -> star st st''.
End Step.
