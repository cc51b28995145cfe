(** * Spec: the statements a reader must trust

    The proofs are long; what they prove is short. This file gathers, with
    no proof, the statements of the main theorems, over the definitions
    they mention (the split of Warblre's spec/props). To trust the project
    a reader checks:

    1. the definitions these statements use (all in the files named below,
       each short and commented with the paper's rule names):
       - [Syntax.v]: [graph], [expr], [guard], [pattern] (Figure 15),
         [pdef], and well-formedness [wfb] / [wf_defs] (with scope:
         [scoped] / [scoped_def]);
       - [Declarative.v]: [eval_expr], [eval_guard] (Figure 8) and the
         declarative relation [matches] (Figure 16), restated below;
       - [Env.v] / [Soundness.v]: [tsub], [fsub], [root_env]: how a result
         of the machine (substitutions over slots) is read as a
         substitution of the pattern's variables;
       - [Priority.v]: [solutions] (the fragment) and [psols] /
         [solutions_k] (the whole calculus, with [plist], [papp],
         [pbind], [rd], [clr]; [pIn], [pprefix], [prel] relate such
         lists), the ordered lists of matches (which answer the matcher
         gives);
       - [Entry.v]: [answer], [assoc], [match_root], [match_all],
         [candidates] (what the library answers) and the prepared forms
         [load_set], [set_match], [set_match_all] the library runs;
       - [Multi.v]: [mmatches] (a multi-root pattern matches a tuple of
         distinct nodes under one substitution), [mpat], [bodies],
         [wf_multi], [mp_scoped] (each root's definition has at most the
         shared variables as parameters), [match_multi], [match_all_multi],
         [same_entry], and
         the multi-root fuel bound [multi_fuel_bound] ([mchain] of
         [mstep] over the roots' bodies, from [Fuel.v]'s [cost]);
       - [Certify.v]: [tmpl] / [tden] (a rule's replacement as a template
         and its denotation), [cert], [opt_at], [agrees] (a term graph
         agrees with a matcher's graph), [through], [inst] / [inst_root]
         (an after node is a template instantiated), [rule_eq] (a rule's
         equation, the hypothesis of [S_rewrite_preserves]);
       - [Fuel.v]: [depth_le] (every downward path has at most [n]
         edges), the class [descending] / [ug] / [args_ok] (every cycle of
         calls passes under an operator application) and the bound
         [cost] / [fuel_bound];
    2. the statements below ([S_…]);
    3. that the last section of this file type-checks (each statement is
       proved by the named theorem), and that [make proofs] passes: no
       unfinished proof, no axiom ([tests/coq/assumptions.golden]), and
       [coqchk] re-checks the compiled files.

    The machine itself ([Algorithmic.step], [Interpreter.run],
    [match_pattern]) need not be read: the statements say what its answers
    mean. It must be read only to know that [OOutOfFuel] counts steps.

    ** The declarative relation (Figure 16), as [Declarative.matches]

    [p @ ⟨θ, φ⟩ ≈ t], written [matches G D θ φ p t]:
    - P-VAR: [θ(x) = t] gives [x @ ⟨θ, φ⟩ ≈ t];
    - P-FUN: [label t = f] and [pᵢ @ ⟨θ, φ⟩ ≈ tᵢ] for the children [tᵢ]
      of [t] give [f(p1..pn) @ ⟨θ, φ⟩ ≈ t];
    - P-ALT-1 / P-ALT-2: [p1 ≈ t] or [p2 ≈ t] gives [p1 ‖ p2 ≈ t];
    - P-GUARD: [p ≈ t] and ⟦g[θ, φ]⟧ = true give [p ; guard(g) ≈ t]
      (three-valued: an unknown guard is not true);
    - P-EXISTS: [p @ ⟨θ ∪ {x ↦ t'}, φ⟩ ≈ t] for some [t'] gives [∃x.p ≈ t]
      (and the same for an operator variable [∃F.p]);
    - P-MATCHCONSTR: [p ≈ t], [θ(x) = t'] and [p' ≈ t'] give
      [p ; (p' ≈ x) ≈ t];
    - P-FUN-VAR: [φ(F) = label t] and [pᵢ ≈ tᵢ] give [F(p1..pn) ≈ t];
    - P-MU: the body of definition [P], with parameter [i] read as the
      caller's [xᵢ] ([call_sub]), matches [t]: [P(x1..xn) ≈ t]. *)

From Coq Require Import List Sorted Permutation.
From PyPM Require Import Syntax Subst Declarative Env Algorithmic Interpreter Soundness
  Priority RootIndex KidIndex Entry Fuel Multi.
Import ListNotations.

(** ** The declarative relation *)

(** Theorem 1 (Match Weakening): growing the substitutions keeps a match. *)
Definition S_match_weakening : Prop :=
  forall G D σ ψ p t σ' ψ',
    matches G D σ ψ p t -> ext σ σ' -> ext ψ ψ' -> matches G D σ' ψ' p t.

(** ** The matcher ([match_pattern]: the machine run with [fuel] steps from
    [match(p, t)], the root's variables being [0..n-1] / [0..m-1]) *)

(** Theorem 2, success: an answer is a declarative match. *)
Definition S_match_pattern_sound : Prop :=
  forall G D fuel n m p t Θ Φ,
    match_pattern G D fuel n m p t = OSuccess Θ Φ ->
    matches G D (tsub Θ (root_env n m)) (fsub Φ (root_env n m)) p t.

(** Theorem 2, failure: "no match" is true of every substitution of the
    root's variables (well-formed patterns: see [wfb]). *)
Definition S_match_pattern_fail_sound : Prop :=
  forall G D fuel n m p t,
    wf_defs D = true -> wfb D p = true ->
    match_pattern G D fuel n m p t = OFailure ->
    forall σ ψ, (forall x, n <= x -> σ x = None) -> (forall F, m <= F -> ψ F = None) ->
    ~ matches G D σ ψ p t.

(** [OOutOfFuel] is no disguised answer: after [fuel] steps the machine is
    still running. *)
Definition S_run_out_of_fuel : Prop :=
  forall G D fuel st, run G D fuel st = OOutOfFuel ->
    exists Θ Φ nf stk k, steps G D fuel st (Running Θ Φ nf stk k).

(** ** Which answer ([Priority.v]; fragment: no call, no [∃]) *)

(** [solutions] lists declarative matches. *)
Definition S_solutions_sound : Prop :=
  forall G D p σ ψ t σ' ψ',
    In (σ', ψ') (solutions G σ ψ p t) ->
    matches G D σ' ψ' p t /\ ext σ σ' /\ ext ψ ψ'.

(** The matcher's answer is the first of them; "no match" means there is
    none. *)
Definition S_first_solution : Prop :=
  forall G D fuel n m p t,
    in_frag n m p = true ->
    (forall Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ ->
       exists σ ψ L, solutions G none_t none_f p t = (σ, ψ) :: L /\
         (forall x, tsub Θ (root_env n m) x = σ x) /\
         (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (match_pattern G D fuel n m p t = OFailure -> solutions G none_t none_f p t = []).

(** With enough fuel, the matcher gives the first solution, or "no match"
    when there is none. *)
Definition S_first_solution_complete : Prop :=
  forall G D n m p t,
    in_frag n m p = true ->
    (forall σ ψ L, solutions G none_t none_f p t = (σ, ψ) :: L ->
       exists fuel Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ /\
         (forall x, tsub Θ (root_env n m) x = σ x) /\
         (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (solutions G none_t none_f p t = [] ->
       exists fuel, match_pattern G D fuel n m p t = OFailure).

(** ** Which answer, the whole calculus ([Priority.v]: calls and [∃]
    included; [solutions_k K] unfolds calls at most [K] deep and has a cut
    [PCut] where it would go deeper) *)

(** Every element of [solutions_k] is a declarative match. *)
Definition S_solutions_k_sound : Prop :=
  forall G D K n m p t σ ψ,
    pIn (σ, ψ) (solutions_k G D K n m p t) -> matches G D σ ψ p t.

(** The matcher's answer with [fuel] steps is the first solution at every
    depth [K >= fuel]; its "no match" means there is none. *)
Definition S_first_solution_k : Prop :=
  forall G D fuel K n m p t,
    fuel <= K ->
    (forall Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ ->
       exists σ ψ L, solutions_k G D K n m p t = PCons (σ, ψ) L /\
         (forall x, tsub Θ (root_env n m) x = σ x) /\
         (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (match_pattern G D fuel n m p t = OFailure -> solutions_k G D K n m p t = PNil).

(** A first solution known at some depth is the matcher's answer with
    enough fuel; no solution means "no match" with enough fuel. *)
Definition S_first_solution_k_complete : Prop :=
  forall G D K n m p t,
    (forall σ ψ L, solutions_k G D K n m p t = PCons (σ, ψ) L ->
       exists fuel Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ /\
         (forall x, tsub Θ (root_env n m) x = σ x) /\
         (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (solutions_k G D K n m p t = PNil -> exists fuel, match_pattern G D fuel n m p t = OFailure).

(** A cut at depth [K]: the matcher has not answered within [K] steps. *)
Definition S_solutions_k_cut : Prop :=
  forall G D K n m p t,
    solutions_k G D K n m p t = PCut ->
    forall fuel, fuel <= K -> match_pattern G D fuel n m p t = OOutOfFuel.

(** The first solution does not depend on the depth: at every depth it is
    the matcher's answer, or still unknown (a cut). *)
Definition S_first_solution_k_stable : Prop :=
  forall G D fuel n m p t,
    (forall Θ Φ, match_pattern G D fuel n m p t = OSuccess Θ Φ ->
       forall K, solutions_k G D K n m p t = PCut \/
         exists σ ψ L, solutions_k G D K n m p t = PCons (σ, ψ) L /\
           (forall x, tsub Θ (root_env n m) x = σ x) /\
           (forall F, fsub Φ (root_env n m) F = ψ F)) /\
    (match_pattern G D fuel n m p t = OFailure ->
       forall K, solutions_k G D K n m p t = PCut \/ solutions_k G D K n m p t = PNil).

(** Unfolding deeper keeps every solution already known, in its place,
    and only replaces the cut ([pprefix]). *)
Definition S_solutions_k_mono : Prop :=
  forall G D K K' n m p t,
    K <= K' -> pprefix (solutions_k G D K n m p t) (solutions_k G D K' n m p t).

(** On the fragment of [solutions], [solutions_k] is [solutions]. *)
Definition S_solutions_k_frag : Prop :=
  forall G D K n m p t,
    in_frag n m p = true ->
    prel (fun a b => (forall x, fst a x = fst b x) /\ (forall F, snd a F = snd b F))
      (solutions_k G D K n m p t) (solutions G none_t none_f p t).

(** ** The library's entry points ([Entry.v]) *)

(** A single match ([pypm_match]): the bindings satisfy the declarative
    relation, bind only the parameters, sorted by variable. *)
Definition S_match_root_sound : Prop :=
  forall G D fuel r t bs fbs,
    match_root G D fuel r t = RMatch bs fbs ->
    exists d, nth_error D r = Some d /\
      matches G D (assoc bs) (assoc fbs) (body d) t /\
      (forall x v, In (x, v) bs -> x < nparams d) /\
      (forall F f, In (F, f) fbs -> F < nfparams d) /\
      StronglySorted (fun a b => fst a < fst b) bs /\
      StronglySorted (fun a b => fst a < fst b) fbs.

(** "No match": under no substitution at all ([wf_defs] checks scope, so
    the variables beyond the parameters are never read: [S_matches_params]). *)
Definition S_match_root_fail_sound : Prop :=
  forall G D fuel r t d,
    wf_defs D = true -> nth_error D r = Some d ->
    match_root G D fuel r t = RNoMatch ->
    forall σ ψ, ~ matches G D σ ψ (body d) t.

(** The root-operator index is a proved "no" ([admits]: the node's
    operator is one of the index's, or has one of its attribute values, as
    the class [F.op_class = c] of an operator variable at the root). *)
Definition S_root_index_no_match : Prop :=
  forall G D P d σ ψ t,
    nth_error D P = Some d ->
    admits G t (ri_find (root_index D) P) = false ->
    ~ matches G D σ ψ (body d) t.

(** [pypm_match_all]: exactly [match_root]'s answers that are not "no". *)
Definition S_match_all_In : Prop :=
  forall G D fuel roots N i t a,
    In (i, t, a) (match_all G D fuel roots N) <->
    t < N /\ exists r, nth_error roots i = Some r /\ match_root G D fuel r t = a /\
                       a <> RNoMatch.

(** [pypm_candidates]: a root that is not a candidate for the node's
    operator, given with the node's attributes of it, has no match. *)
Definition S_candidates_sound : Prop :=
  forall G D roots i r t fuel,
    nth_error roots i = Some r ->
    ~ In i (candidates D roots (label G t) (sym_attrs G (label G t))) ->
    match_root G D fuel r t = RNoMatch /\
    forall d σ ψ, nth_error D r = Some d -> ~ matches G D σ ψ (body d) t.

(** Which answer [pypm_match] gives: for a root definition in the
    fragment of [Priority.v], the bindings are the first solution, and "no
    match" means there is none. *)
Definition S_match_root_first : Prop :=
  forall G D fuel r t d,
    nth_error D r = Some d -> in_frag (nparams d) (nfparams d) (body d) = true ->
    (forall bs fbs, match_root G D fuel r t = RMatch bs fbs ->
       exists σ ψ L, solutions G none_t none_f (body d) t = (σ, ψ) :: L /\
         (forall x, assoc bs x = σ x) /\ (forall F, assoc fbs F = ψ F)) /\
    (match_root G D fuel r t = RNoMatch -> solutions G none_t none_f (body d) t = []).

(** Which answer [pypm_match] gives, any root: the bindings are the first
    solution at every depth [K >= fuel]; "no match" means no depth has a
    first solution. *)
Definition S_match_root_first_k : Prop :=
  forall G D fuel r t d,
    nth_error D r = Some d ->
    (forall bs fbs K, fuel <= K -> match_root G D fuel r t = RMatch bs fbs ->
       exists σ ψ L, solutions_k G D K (nparams d) (nfparams d) (body d) t = PCons (σ, ψ) L /\
         (forall x, assoc bs x = σ x) /\ (forall F, assoc fbs F = ψ F)) /\
    (match_root G D fuel r t = RNoMatch ->
       forall K s L, solutions_k G D K (nparams d) (nfparams d) (body d) t <> PCons s L).

(** The prepared forms the library runs are the functions above. *)
Definition S_set_match_correct : Prop :=
  forall G D roots ps fuel i r t,
    load_set D roots = Some ps -> nth_error roots i = Some r ->
    set_match G ps fuel i t = match_root G D fuel r t.

Definition S_set_match_all_correct : Prop :=
  forall G D roots ps fuel N,
    load_set D roots = Some ps ->
    set_match_all G ps fuel N = match_all G D fuel roots N.

(** ** Fuel that suffices ([Fuel.v]) *)

(** A well-formed pattern whose recursion descends (every cycle of calls
    passes under an operator application) never runs out of
    [fuel_bound D N p] steps at a node of depth at most [N]. *)
Definition S_match_pattern_fuel : Prop :=
  forall G D N fuel n m p t,
    wf_defs D = true -> descending D = true ->
    wfb D p = true -> ug D (LMAX D) p = true -> args_ok D p = true ->
    depth_le G N t -> fuel_bound D N p <= fuel ->
    match_pattern G D fuel n m p t <> OOutOfFuel.

(** The same for the library's answer. *)
Definition S_match_root_fuel : Prop :=
  forall G D N fuel r t d,
    wf_defs D = true -> descending D = true -> nth_error D r = Some d ->
    depth_le G N t -> fuel_bound D N (body d) <= fuel ->
    match_root G D fuel r t <> ROutOfFuel.

(** Completeness: with that fuel, a root that matches declaratively (under
    any substitution) gets a match, neither "no match" nor "out of fuel". *)
Definition S_match_root_complete : Prop :=
  forall G D N fuel r t d σ ψ,
    wf_defs D = true -> descending D = true -> nth_error D r = Some d ->
    depth_le G N t -> fuel_bound D N (body d) <= fuel ->
    matches G D σ ψ (body d) t ->
    exists bs fbs, match_root G D fuel r t = RMatch bs fbs.

(** ** Multi-root patterns ([Multi.v]) *)

(** A multi-root match ([pypm_match_multi]): the first root at the visited
    node, the others at distinct nodes of the graph, all under one
    substitution (the bindings), the cross-root guard true. *)
Definition S_match_multi_sound : Prop :=
  forall G D fuel N mp t ts bs fbs,
    match_multi G D fuel N mp t = MMatch ts bs fbs ->
    exists ps, bodies D (mp_roots mp) = Some ps /\
      hd_error ts = Some t /\ Forall (fun c => c < N) (tl ts) /\
      mmatches G D (assoc bs) (assoc fbs) ps (mp_guard mp) ts /\
      (forall x v, In (x, v) bs -> x < mp_n mp) /\
      (forall F f, In (F, f) fbs -> F < mp_m mp) /\
      StronglySorted (fun a b => fst a < fst b) bs /\
      StronglySorted (fun a b => fst a < fst b) fbs.

(** "No match": no tuple of nodes with the first at the visited node
    matches, under any substitution ([mp_scoped], which the library checks
    after [wf_multi], makes the roots read the shared variables only:
    [S_mmatches_scope]). *)
Definition S_match_multi_fail_sound : Prop :=
  forall G D fuel N mp t ps,
    wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
    mp_scoped D mp = true ->
    match_multi G D fuel N mp t = MNoMatch ->
    forall ts σ ψ, hd_error ts = Some t -> Forall (fun c => c < N) (tl ts) ->
    ~ mmatches G D σ ψ ps (mp_guard mp) ts.

(** One root and no cross-root guard: the single-root relation. *)
Definition S_mmatches_one : Prop :=
  forall G D σ ψ p t, mmatches G D σ ψ [p] GTrue [t] <-> matches G D σ ψ p t.

(** The root order does not change which tuples match. *)
Definition S_mmatches_perm : Prop :=
  forall G D σ ψ ps g ts ps' ts',
    length ps = length ts -> length ps' = length ts' ->
    Permutation (combine ps ts) (combine ps' ts') ->
    (mmatches G D σ ψ ps g ts <-> mmatches G D σ ψ ps' g ts').

(** The users table, computed once per graph from the node table, is
    complete: every node [u < N] is a user of each of its children. *)
Definition S_users_map_complete : Prop :=
  forall G N u c, u < N -> In c (children G u) -> In u (ufind c (users_map G N)).

(** The candidates of upward traversal are complete: every node [< N] that
    can match a later root, under a substitution under which the first root
    matches [t] and the roots before it match the nodes chosen, is among the
    candidates the search tries ([incands]). *)
Definition S_up_cands_complete : Prop :=
  forall G D ad N mp σ ψ p1 ps t suf,
    bodies D (mp_roots mp) = Some (p1 :: ps) ->
    matches G D σ ψ p1 t -> matches_list G D σ ψ ps suf -> Forall (fun c => c < N) suf ->
    incands [t] suf (up_cands G D ad (users_map G N) (root_index D) N mp).

(** The same search with the index's candidates only (the previous
    version, kept for benchmarking): sound and failure-sound too. *)
Definition S_match_multi_idx_sound : Prop :=
  forall G D fuel N mp t ts bs fbs,
    match_multi_idx G D fuel N mp t = MMatch ts bs fbs ->
    exists ps, bodies D (mp_roots mp) = Some ps /\
      hd_error ts = Some t /\ Forall (fun c => c < N) (tl ts) /\
      mmatches G D (assoc bs) (assoc fbs) ps (mp_guard mp) ts.

Definition S_match_multi_idx_fail_sound : Prop :=
  forall G D fuel N mp t ps,
    wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
    mp_scoped D mp = true ->
    match_multi_idx G D fuel N mp t = MNoMatch ->
    forall ts σ ψ, hd_error ts = Some t -> Forall (fun c => c < N) (tl ts) ->
    ~ mmatches G D σ ψ ps (mp_guard mp) ts.

(** [pypm_match_all_multi]: every entry is a match of distinct nodes, the
    first at the entry's node (or a run out of fuel, never "no match") ... *)
Definition S_match_all_multi_sound : Prop :=
  forall G D fuel N mp t ts bs fbs,
    In (t, MMatch ts bs fbs) (match_all_multi G D fuel N mp) ->
    t < N /\ exists ps, bodies D (mp_roots mp) = Some ps /\
      hd_error ts = Some t /\ Forall (fun c => c < N) (tl ts) /\
      mmatches G D (assoc bs) (assoc fbs) ps (mp_guard mp) ts.

(** ... each set of nodes at most once (not once per permutation) ... *)
Definition S_match_all_multi_once : Prop :=
  forall G D fuel N mp,
    ForallOrdPairs (fun e1 e2 => ~ same_entry e1 e2) (match_all_multi G D fuel N mp).

(** ... and every set: unless an entry says fuel ran out, every tuple of
    nodes of the graph that matches, under any substitution, has its set
    of nodes among the entries. *)
Definition S_match_all_multi_sets : Prop :=
  forall G D fuel N mp ps ts σ ψ,
    wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
    mp_scoped D mp = true ->
    (forall t, ~ In (t, MOutOfFuel) (match_all_multi G D fuel N mp)) ->
    ts <> [] -> Forall (fun c => c < N) ts ->
    mmatches G D σ ψ ps (mp_guard mp) ts ->
    exists t ts' bs fbs, In (t, MMatch ts' bs fbs) (match_all_multi G D fuel N mp) /\
      forall x, In x ts <-> In x ts'.

(** ... each at the smallest node that is the first root of a match with
    that set: an entry's node is never after the first node of a tuple
    matching the entry's set. *)
Definition S_match_all_multi_first : Prop :=
  forall G D fuel N mp ps t ts bs fbs ts' σ ψ,
    wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
    mp_scoped D mp = true ->
    In (t, MMatch ts bs fbs) (match_all_multi G D fuel N mp) ->
    Forall (fun c => c < N) ts' -> mmatches G D σ ψ ps (mp_guard mp) ts' ->
    (forall x, In x ts <-> In x ts') ->
    forall t', hd_error ts' = Some t' -> t <= t'.

(** Fuel that suffices for a multi-root search: for a descending table
    and a graph where every downward path has at most [dp] edges,
    [multi_fuel_bound D dp ps] of the roots' bodies (every machine run of
    the search, a prefix of the roots or all of them and the cross-root
    guard, takes at most that many steps) never gives "out of fuel". *)
Definition S_match_multi_fuel : Prop :=
  forall G D dp fuel N mp t ps,
    wf_defs D = true -> descending D = true -> (forall t, depth_le G dp t) ->
    bodies D (mp_roots mp) = Some ps -> multi_fuel_bound D dp ps <= fuel ->
    match_multi G D fuel N mp t <> MOutOfFuel.

(** Completeness: with that fuel, when some tuple of distinct nodes, the
    first at the visited node and the others nodes of the graph, matches,
    [pypm_match_multi] gives a match, neither "no match" nor "out of
    fuel". *)
Definition S_match_multi_complete : Prop :=
  forall G D dp fuel N mp t ps ts σ ψ,
    wf_defs D = true -> descending D = true -> (forall t, depth_le G dp t) ->
    bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
    mp_scoped D mp = true ->
    multi_fuel_bound D dp ps <= fuel ->
    hd_error ts = Some t -> Forall (fun c => c < N) (tl ts) ->
    mmatches G D σ ψ ps (mp_guard mp) ts ->
    exists ts' bs fbs, match_multi G D fuel N mp t = MMatch ts' bs fbs.

(** ... and [pypm_match_all_multi] has no entry out of fuel (so, by
    [S_match_all_multi_sets], every set of nodes that matches is an
    entry's). *)
Definition S_match_all_multi_fuel : Prop :=
  forall G D dp fuel N mp ps,
    wf_defs D = true -> descending D = true -> (forall t, depth_le G dp t) ->
    bodies D (mp_roots mp) = Some ps -> multi_fuel_bound D dp ps <= fuel ->
    forall t, ~ In (t, MOutOfFuel) (match_all_multi G D fuel N mp).

(** ** Each statement is proved by the named theorem *)

Lemma spec_match_weakening : S_match_weakening.
Proof. exact match_weakening. Qed.
Lemma spec_match_pattern_sound : S_match_pattern_sound.
Proof. exact match_pattern_sound. Qed.
Lemma spec_match_pattern_fail_sound : S_match_pattern_fail_sound.
Proof. exact match_pattern_fail_sound. Qed.
Lemma spec_run_out_of_fuel : S_run_out_of_fuel.
Proof. exact run_out_of_fuel. Qed.
Lemma spec_solutions_sound : S_solutions_sound.
Proof. exact solutions_sound. Qed.
Lemma spec_first_solution : S_first_solution.
Proof. exact first_solution. Qed.
Lemma spec_first_solution_complete : S_first_solution_complete.
Proof. exact first_solution_complete. Qed.
Lemma spec_match_root_sound : S_match_root_sound.
Proof. exact match_root_sound. Qed.
Lemma spec_match_root_fail_sound : S_match_root_fail_sound.
Proof. exact match_root_fail_sound_any. Qed.
Lemma spec_root_index_no_match : S_root_index_no_match.
Proof. exact root_index_no_match. Qed.
Lemma spec_match_all_In : S_match_all_In.
Proof. exact match_all_In. Qed.
Lemma spec_candidates_sound : S_candidates_sound.
Proof. exact candidates_sound. Qed.
Lemma spec_match_root_first : S_match_root_first.
Proof.
  intros G D fuel r t d Hd Hf. split.
  - intros bs fbs. exact (match_root_first G D fuel r t d bs fbs Hd Hf).
  - exact (match_root_none_first G D fuel r t d Hd Hf).
Qed.
Lemma spec_solutions_k_sound : S_solutions_k_sound.
Proof. exact solutions_k_sound. Qed.
Lemma spec_first_solution_k : S_first_solution_k.
Proof. exact first_solution_k. Qed.
Lemma spec_first_solution_k_complete : S_first_solution_k_complete.
Proof. exact first_solution_k_complete. Qed.
Lemma spec_solutions_k_cut : S_solutions_k_cut.
Proof. exact solutions_k_cut. Qed.
Lemma spec_first_solution_k_stable : S_first_solution_k_stable.
Proof. exact first_solution_k_stable. Qed.
Lemma spec_solutions_k_mono : S_solutions_k_mono.
Proof. exact solutions_k_mono. Qed.
Lemma spec_solutions_k_frag : S_solutions_k_frag.
Proof. exact solutions_k_frag. Qed.
Lemma spec_match_root_first_k : S_match_root_first_k.
Proof.
  intros G D fuel r t d Hd. split.
  - intros bs fbs K Hle. exact (match_root_first_k G D fuel K r t d bs fbs Hd Hle).
  - exact (match_root_none_k G D fuel r t d Hd).
Qed.
Lemma spec_set_match_correct : S_set_match_correct.
Proof. exact set_match_correct. Qed.
Lemma spec_set_match_all_correct : S_set_match_all_correct.
Proof. exact set_match_all_correct. Qed.
Lemma spec_match_pattern_fuel : S_match_pattern_fuel.
Proof. intros G D N fuel n m p t HD Hdesc. exact (match_pattern_fuel G D HD Hdesc N fuel n m p t). Qed.
Lemma spec_match_root_fuel : S_match_root_fuel.
Proof. exact match_root_fuel. Qed.
Lemma spec_match_root_complete : S_match_root_complete.
Proof. exact match_root_fuel_complete_any. Qed.
Lemma spec_match_multi_sound : S_match_multi_sound.
Proof. exact match_multi_sound. Qed.
Lemma spec_match_multi_fail_sound : S_match_multi_fail_sound.
Proof. exact match_multi_fail_sound_any. Qed.
Lemma spec_mmatches_one : S_mmatches_one.
Proof. exact mmatches_one. Qed.
Lemma spec_mmatches_perm : S_mmatches_perm.
Proof. exact mmatches_perm. Qed.
Lemma spec_match_all_multi_sound : S_match_all_multi_sound.
Proof.
  intros G D fuel N mp t ts bs fbs H.
  destruct (match_all_multi_sound G D fuel N mp t _ H) as [Ht (ps & H1 & H2 & H3 & H4 & _)].
  split; [exact Ht|]. exists ps. auto.
Qed.
Lemma spec_match_all_multi_once : S_match_all_multi_once.
Proof. exact match_all_multi_once. Qed.
Lemma spec_match_all_multi_sets : S_match_all_multi_sets.
Proof. exact match_all_multi_sets_any. Qed.
Lemma spec_match_all_multi_first : S_match_all_multi_first.
Proof. exact match_all_multi_first_any. Qed.
Lemma spec_match_multi_fuel : S_match_multi_fuel.
Proof. exact match_multi_fuel. Qed.
Lemma spec_match_multi_complete : S_match_multi_complete.
Proof. exact match_multi_fuel_complete_any. Qed.
Lemma spec_match_all_multi_fuel : S_match_all_multi_fuel.
Proof. exact match_all_multi_fuel. Qed.

Lemma spec_users_map_complete : S_users_map_complete.
Proof. intros G N u c. exact (users_map_complete G N u c). Qed.
Lemma spec_up_cands_complete : S_up_cands_complete.
Proof. intros G D ad N mp. exact (up_cands_complete G D ad N mp). Qed.
Lemma spec_match_multi_idx_sound : S_match_multi_idx_sound.
Proof.
  intros G D fuel N mp t ts bs fbs H.
  destruct (match_multi_idx_sound G D fuel N mp t ts bs fbs H) as (ps & H1 & H2 & H3 & H4 & _).
  exists ps. auto.
Qed.
Lemma spec_match_multi_idx_fail_sound : S_match_multi_idx_fail_sound.
Proof. exact match_multi_idx_fail_sound_any. Qed.

(** ** Scope, constant stack, and which multi-root tuple *)

(** Scope ([Syntax.scoped_def], part of [wf_defs]): a body reads only its
    parameters and the variables of its own [∃]s, so a match under any
    substitution is one under its restriction to the parameters. *)
Definition S_matches_params : Prop :=
  forall G D P d σ ψ t,
    wf_defs D = true -> nth_error D P = Some d -> matches G D σ ψ (body d) t ->
    matches G D (restrict (fun x => Nat.ltb x (nparams d)) σ)
                (restrict (fun F => Nat.ltb F (nfparams d)) ψ) (body d) t.

(** The same for multi-root patterns ([Multi.mp_scoped]: each root's
    definition has at most [mp_n] / [mp_m] parameters): a match under any
    substitution is one under its restriction to the shared variables. *)
Definition S_mmatches_scope : Prop :=
  forall G D mp ps σ ψ ts,
    wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
    mp_scoped D mp = true ->
    mmatches G D σ ψ ps (mp_guard mp) ts ->
    mmatches G D (restrict (fun x => Nat.ltb x (mp_n mp)) σ)
                 (restrict (fun F => Nat.ltb F (mp_m mp)) ψ) ps (mp_guard mp) ts.

(** The lists over every node of the graph that the extracted code builds
    ([Multi.v]: the users table, the visited nodes, the index's candidates,
    the entries of [match_all_multi]) are built with accumulators (constant
    stack, linear time) and are the standard ones. *)
Definition S_users_map_fold : Prop :=
  forall G N, users_map G N = fold_left (add_users G) (rev (seq 0 N)) (VarMap.empty (list node)).

Definition S_seq_tr : Prop := forall s k, seq_tr s k = seq s k.

Definition S_filter_upto : Prop := forall f k, filter_upto f k = filter f (seq 0 k).

Definition S_mall_rev : Prop :=
  forall G D R fuel mp cands nodes,
    mall G D R fuel mp cands nodes =
    rev (ms_out (fold_left (visit G D R fuel mp cands) nodes (mkMstate [] [] false))).

(** Which tuple [pypm_match_multi] gives: the first tuple, in the search
    order [ctuples] (depth first over the roots; each root's candidates in
    the order of its candidate list: the users of its anchor node in
    increasing order, or the nodes its index admits in increasing order),
    that matches under some substitution. *)
Definition S_match_multi_first : Prop :=
  forall G D fuel N mp t ps ts bs fbs,
    wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
    mp_scoped D mp = true ->
    match_multi G D fuel N mp t = MMatch ts bs fbs ->
    exists pre post,
      ctuples [t] (up_cands G D anchor_depth (users_map G N) (root_index D) N mp)
        = pre ++ ts :: post /\
      forall u σ ψ, In u pre -> ~ mmatches G D σ ψ ps (mp_guard mp) u.

Lemma spec_matches_params : S_matches_params.
Proof. intros G D P d σ ψ t HD. exact (matches_params G D HD P d σ ψ t). Qed.
Lemma spec_mmatches_scope : S_mmatches_scope.
Proof. exact mmatches_scope. Qed.
Lemma spec_users_map_fold : S_users_map_fold.
Proof. exact users_map_fold. Qed.
Lemma spec_seq_tr : S_seq_tr.
Proof. exact seq_tr_eq. Qed.
Lemma spec_filter_upto : S_filter_upto.
Proof. exact filter_upto_eq. Qed.
Lemma spec_mall_rev : S_mall_rev.
Proof. exact mall_rev. Qed.
Lemma spec_match_multi_first : S_match_multi_first.
Proof. exact match_multi_first_any. Qed.

(** ** The rewrite step ([Rewrite.v])

    The firing [replace g fs] (each root's uses redirected to its
    replacement, dead nodes dropped, the rest renumbered in order) on term
    graphs [tgraph], denoted by [denote] under an abstract interpretation
    [interp] of the labels; and the validator [validate] the library runs
    on each driver pass ([pypm_validate_rewrite]). *)

From PyPM Require Import Rewrite.

(** The result of a firing is well formed, and its outputs are the old ones
    or their replacements ([origin] names the node of the redirected graph
    that a node of the result keeps). *)
Definition S_rewrite_wf : Prop :=
  forall g fs, wf_tgraph g -> firings_ok g fs ->
  wf_tgraph (replace g fs) /\
  map (origin g fs) (touts (replace g fs)) = map (rep_of fs) (touts g) /\
  (forall o, In o (touts g) -> rep_of fs o = o \/ In (o, rep_of fs o) fs).

(** Congruence: if every replacement denotes what its root denoted, the
    outputs of the result denote what the old outputs did. *)
Definition S_rewrite_denote : Prop :=
  forall V (interp : nat -> list V -> V) (dflt : V) g fs,
  wf_tgraph g -> firings_ok g fs ->
  (forall r p, In (r, p) fs -> dnode V interp dflt g p = dnode V interp dflt g r) ->
  denote V interp dflt (replace g fs) = denote V interp dflt g.

(** The validator is sound: when it accepts, every output of [after]
    denotes what the same output of [before] did, given that each firing's
    replacement (in [after]) denotes what its root (in [before]) did.
    Whatever its hints [fi], [mi] and [us] (which the C API computes: the
    firing at each before node, the inverse of the map, a reader or output
    position of each after node). *)
Definition S_validate_rewrite_sound : Prop :=
  forall V (interp : nat -> list V -> V) (dflt : V) before after fs mp fi mi us,
  validate before after fs mp fi mi us = None ->
  (forall r p, In (r, p) fs -> dnode V interp dflt after p = dnode V interp dflt before r) ->
  denote V interp dflt after = denote V interp dflt before.

Lemma spec_rewrite_wf : S_rewrite_wf.
Proof. exact replace_wf. Qed.
Lemma spec_rewrite_denote : S_rewrite_denote.
Proof. intros V interp dflt. exact (replace_denote V interp dflt). Qed.
Lemma spec_validate_rewrite_sound : S_validate_rewrite_sound.
Proof. intros V interp dflt. exact (validate_sound V interp dflt). Qed.

(** What acceptance says about the graphs: both well formed, the firings'
    roots distinct, the map an injective renaming avoiding fired roots under
    which each mapped after node is its before node with every argument
    the replacement of a fired root or the image of the before argument
    ([corr]), the outputs likewise, and every after node reached from the
    outputs: [after] is [before] with the firings applied, up to [mp]. *)
Definition S_validate_rewrite_renaming : Prop :=
  forall before after fs mp fi mi us,
  validate before after fs mp fi mi us = None ->
  wf_tgraph before /\ wf_tgraph after /\
  (forall r p, In (r, p) fs -> r < length (tnodes before) /\ p < length (tnodes after)) /\
  NoDup (map fst fs) /\
  length mp = length (tnodes after) /\
  (forall h g, nth_error mp h = Some (Some g) ->
     g < length (tnodes before) /\ ~ In g (map fst fs) /\
     (forall h', nth_error mp h' = Some (Some g) -> h' = h) /\
     tlabel (tnode_at after h) = tlabel (tnode_at before g) /\
     Forall2 (corr fs mp) (targs (tnode_at after h)) (targs (tnode_at before g))) /\
  Forall2 (corr fs mp) (touts after) (touts before) /\
  (forall h, h < length (tnodes after) -> reach after h).

Lemma spec_validate_rewrite_renaming : S_validate_rewrite_renaming.
Proof. exact validate_renaming. Qed.

(** The equation form: when the validator accepts, firing the firings on
    [before] extended with the new nodes of [after] gives [after], up to a
    bijective renaming of nodes ([tiso]: labels, arguments and outputs
    kept). [extension before after mp eB eN g]: [g] holds [before]'s nodes
    (placed by [eB]) and [after]'s new nodes (placed by [eN], arguments
    placed by [embed]: a mapped after node where its before node is), at
    distinct places, with [before]'s outputs; any order, provided [g] is
    well formed and each replacement precedes its root ([firings_ok]).
    Such a [g] need not exist for several firings whose replacements and
    roots depend on each other in a cycle ([Rewrite.cyc_no_extension]). *)
Definition S_validate_rewrite_replace : Prop :=
  forall before after fs mp fi mi us eB eN g,
  validate before after fs mp fi mi us = None ->
  extension before after mp eB eN g -> wf_tgraph g -> firings_ok g (embed_firings mp eB eN fs) ->
  exists σ, tiso σ after (replace g (embed_firings mp eB eN fs)).

Lemma spec_validate_rewrite_replace : S_validate_rewrite_replace.
Proof. exact validate_replace. Qed.

(** ** The remaining entry points the C API calls

    [pypm_match_all] runs [Entry.set_match_all_fold], [pypm_candidates]
    [Entry.set_candidates], [pypm_dominates] [Dominates.dom_result] (one
    node) or [Dominates.dom_all] (every node), and the decoders check every
    attribute value and guard constant with [Values.value_ok]. What each
    computes: *)

From Coq Require Import ZArith Bool.
From PyPM Require Values Dominates.

(** [pypm_match_all]: the streaming form applies its callback to the
    entries of [match_all] ([S_match_all_In]), in order. *)
Definition S_set_match_all_fold_correct : Prop :=
  forall A G D roots ps fuel N (f : A -> nat -> node -> answer -> A) acc,
    load_set D roots = Some ps ->
    set_match_all_fold G ps fuel N f acc = fold_left (apply_entry f) (match_all G D fuel roots N) acc.

(** [pypm_candidates]: the candidates of [S_candidates_sound]. *)
Definition S_set_candidates_correct : Prop :=
  forall D roots ps f sa,
    load_set D roots = Some ps -> set_candidates ps f sa = candidates D roots f sa.

(** [pypm_candidates_at]: a root that is not a candidate for the node's
    operator and its arguments' operators (each given with the node's
    attributes of it) has no declarative match, and the matcher answers no
    match there. *)
Definition S_candidates_at_sound : Prop :=
  forall G D roots i r t,
    nth_error roots i = Some r ->
    ~ In i (candidates_at D roots (label G t) (sym_attrs G (label G t)) (kid_syms G t)) ->
    (forall d σ ψ, nth_error D r = Some d -> ~ matches G D σ ψ (body d) t) /\
    (forall fuel bs fbs, match_root G D fuel r t <> RMatch bs fbs).

(** The children's index itself: a definition whose index rejects
    a node's arguments has no match there. *)
Definition S_kid_index_sound : Prop :=
  forall G D P d σ ψ t,
    nth_error D P = Some d -> matches G D σ ψ (body d) t ->
    k_mem (ki_find (kid_index D (root_index D)) P) (label G t) (sym_attrs G (label G t))
          (kid_syms G t) = true.

(** [pypm_candidates_at]: the prepared form, with the children's index of
    each root ([kid_table], computed when the set is loaded), is
    [candidates_at]. *)
Definition S_set_candidates_at_correct : Prop :=
  forall D roots ps f sa ks,
    load_set D roots = Some ps ->
    set_candidates_at ps (kid_table D roots) f sa ks = candidates_at D roots f sa ks.

(** [pypm_dominates] at one node: a "yes" is [Dominates.dominates_spec]
    (with [topo]), its parent the unique parent of the region and its
    region the nodes the walk reaches; a "no" is a proved no when the users
    table is the node table's ([users_ok]; the library builds it so). *)
Definition S_dom_result : Prop :=
  forall N ch konst live isOut isP isI U root b p R,
    Dominates.dom_result N ch konst live isOut isP isI U root = (b, p, R) ->
    (b = true ->
       Dominates.topo N ch /\ Dominates.dominates_spec N ch konst live isOut isP isI root /\
       (forall x, In x R <-> Dominates.reach ch konst isP root x) /\
       exists q, p = Some q /\ Dominates.reach ch konst isP root q /\ q <> root /\ isP q = true /\
         forall q', Dominates.reach ch konst isP root q' -> q' <> root -> isP q' = true -> q' = q) /\
    (Dominates.users_ok N ch live U ->
       (b = true <-> Dominates.topo N ch /\ Dominates.dominates_spec N ch konst live isOut isP isI root)).

(** [pypm_dominates] at every node (root < 0). *)
Definition S_dom_all_correct : Prop :=
  forall N ch konst live isOut isP isI isC U l,
    Dominates.dom_all N ch konst live isOut isP isI isC U = Some l ->
    Dominates.topo N ch /\
    (forall r b p R, In (r, b, p, R) l ->
       isC r = true /\ (b = true <-> Dominates.dominates_spec N ch konst live isOut isP isI r) /\
       p = Dominates.dom_parent ch konst isP r /\ R = Dominates.region ch konst isP r) /\
    (forall r, r < N -> isC r = true -> exists b p R, In (r, b, p, R) l).

(** The integer range ([Values.v]): [value_ok] is [|z| <= 2^62 - 1]; every
    value a guard expression evaluates to on a checked graph and pattern is
    in range, and so is every operand and result of its arithmetic; so the
    extracted code, which realizes [Z] by OCaml's [int], computes exactly. *)
Definition S_value_ok_iff : Prop :=
  forall z, Values.value_ok z = true <-> (- Values.value_max <= z <= Values.value_max)%Z.

Definition S_eval_expr_value_ok : Prop :=
  forall G, Values.graph_values_ok G ->
    forall σ ψ e v, Values.expr_consts_ok e = true -> eval_expr G σ ψ e = Some v ->
    Values.value_ok v = true.

Definition S_guard_arith_in_range : Prop :=
  forall x y,
    (in_bound add_bound x && in_bound add_bound y = true ->
     Values.value_ok x = true /\ Values.value_ok y = true /\
     Values.value_ok (x + y)%Z = true /\ Values.value_ok (x - y)%Z = true) /\
    (in_bound mul_bound x && in_bound mul_bound y = true ->
     Values.value_ok x = true /\ Values.value_ok y = true /\ Values.value_ok (x * y)%Z = true).

Definition S_bounds_value_ok : Prop :=
  Values.value_ok add_bound = true /\ Values.value_ok (- add_bound)%Z = true /\
  Values.value_ok mul_bound = true /\ Values.value_ok (- mul_bound)%Z = true /\
  Values.value_ok Values.value_max = true /\ Values.value_ok (- Values.value_max)%Z = true.

Lemma spec_set_match_all_fold_correct : S_set_match_all_fold_correct.
Proof. intros A G. exact (set_match_all_fold_correct G A). Qed.
Lemma spec_set_candidates_correct : S_set_candidates_correct.
Proof. exact set_candidates_correct. Qed.
Lemma spec_candidates_at_sound : S_candidates_at_sound.
Proof. exact candidates_at_sound. Qed.
Lemma spec_kid_index_sound : S_kid_index_sound.
Proof. exact kid_index_sound. Qed.
Lemma spec_set_candidates_at_correct : S_set_candidates_at_correct.
Proof. exact set_candidates_at_correct. Qed.
Lemma spec_dom_result : S_dom_result.
Proof.
  intros N ch konst live isOut isP isI U root b p R H.
  unfold Dominates.dom_result in H. injection H as <- <- <-. split.
  - intros Hc. destruct (Dominates.dom_check_sound N ch konst live isOut isP isI U root Hc)
      as [Ht Hs].
    split; [exact Ht|]. split; [exact Hs|]. split.
    + exact (Dominates.region_correct N ch konst live isOut isP isI U root Ht (proj1 Hs)).
    + exact (Dominates.dom_parent_correct N ch konst live isOut isP isI U root Hc).
  - exact (Dominates.dom_check_correct N ch konst live isOut isP isI U root).
Qed.
Lemma spec_dom_all_correct : S_dom_all_correct.
Proof. exact Dominates.dom_all_correct. Qed.
Lemma spec_value_ok_iff : S_value_ok_iff.
Proof. exact Values.value_ok_iff. Qed.
Lemma spec_eval_expr_value_ok : S_eval_expr_value_ok.
Proof. exact Values.eval_expr_value_ok. Qed.
Lemma spec_guard_arith_in_range : S_guard_arith_in_range.
Proof. exact Values.guard_arith_in_range. Qed.
Lemma spec_bounds_value_ok : S_bounds_value_ok.
Proof. exact Values.bounds_value_ok. Qed.

(** ** Firing certificates ([Certify.v])

    [validate_firings] ([pypm_validate_firings]) is [validate] plus, per
    firing, a certificate: the rule's pattern (root [k] of the loaded set),
    the substitution [sb] (pattern variable -> before node) and the
    replacement as a template [tmpl] over the pattern's variables ([CRule]),
    or a merge of equal nodes ([CMerge]). The term graph [before] must agree
    with the matcher's graph [G] ([agrees]: through [gm], one to one, each
    node with an image has its label's operator [sym] and its arguments'
    images as children). Its hints [fi], [mi], [us] ([validate]'s) and [gi]
    (which before node each node of [G] is the image of) are the C API's,
    trusted for nothing: the statements hold for any. *)

From PyPM Require Import Certify.

(** Accepted: the pass is [validate]'s, the graphs agree, and each firing
    is certified: the proved matcher matches the rule's pattern at the
    root's image under the images of the substitution (the declarative
    relation, [S_match_root_sound]), and the replacement is the template
    instantiated with it ([inst_root]); a merge's replacement has the root's
    label and arguments. *)
Definition S_validate_firings_sound : Prop :=
  forall G nG D roots ps fuel sym gm before after fs mp cs fi mi us gi,
    load_set D roots = Some ps ->
    validate_firings G nG ps fuel sym gm before after fs mp cs fi mi us gi = None ->
    validate before after fs mp fi mi us = None /\
    agrees G (opt_at sym) before (opt_at gm) /\
    length cs = length fs /\
    forall i r p c, nth_error fs i = Some (r, p) -> nth_error cs i = Some c ->
      match c with
      | CMerge =>
          tlabel (tnode_at after p) = tlabel (tnode_at before r) /\
          Forall2 (corr fs mp) (targs (tnode_at after p)) (targs (tnode_at before r))
      | CRule k sb t =>
          exists ri d tr σ ψ,
            nth_error roots k = Some ri /\ nth_error D ri = Some d /\
            opt_at gm r = Some tr /\
            (forall x, σ x = through (opt_at gm) (assoc sb) x) /\
            matches G D σ ψ (body d) tr /\
            inst_root after fs mp (assoc sb) t p
      end.

(** File -> matched -> replaced -> same outputs: with one hypothesis per
    fired rule, its equation [rule_eq] (wherever its pattern matches, the
    root denotes what its template does under the substitution; what
    [check-rules] proves or tests), every output of [after] denotes what
    the same output of [before] did. *)
Definition S_rewrite_preserves : Prop :=
  forall V (interp : nat -> list V -> V) (dflt : V) G nG D roots ps fuel sym gm
         before after fs mp cs fi mi us gi,
    load_set D roots = Some ps ->
    validate_firings G nG ps fuel sym gm before after fs mp cs fi mi us gi = None ->
    (forall k sb t ri d, In (CRule k sb t) cs -> nth_error roots k = Some ri ->
       nth_error D ri = Some d -> rule_eq V interp dflt D (opt_at sym) d t) ->
    denote V interp dflt after = denote V interp dflt before.

Lemma spec_validate_firings_sound : S_validate_firings_sound.
Proof. exact validate_firings_sound. Qed.
Lemma spec_rewrite_preserves : S_rewrite_preserves.
Proof. intros V interp dflt. exact (rewrite_preserves V interp dflt). Qed.
