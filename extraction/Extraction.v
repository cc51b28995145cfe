(** * Extraction of the executable matcher to one OCaml module

    Node, symbol, variable and attribute ids and fuel are [nat] in Coq and
    native OCaml [int]s here (ExtrOcamlNatInt); guard arithmetic over [Z]
    uses native ints too (ExtrOcamlZInt). Both are part of the trusted base:
    the decoder only accepts ids in [0, 2^62), and checks every attribute
    value and guard constant with the extracted [Values.value_ok]
    ([|v| <= 2^62 - 1]); under that precondition every [Z] operation the
    extracted code performs has its result in OCaml's range, where [int]
    arithmetic is exact ([Values.eval_expr_value_ok],
    [Values.guard_arith_in_range]). bool, option, list and pairs map to
    OCaml's own types (ExtrOcamlBasic). Every constant realized here is
    realized with [Stdlib] (the Makefile's [extract] rule fails if the
    extracted file names [Pervasives]).

    The library calls the entry points of [Entry.v] ([load_set],
    [set_match], [set_match_all_fold], [set_candidates], [effective_fuel];
    [kid_table] once per loaded set and [set_candidates_at] with it),
    the dominator checker [Dominates.dom_result] and [Dominates.dom_all] (Relay's [dominates]),
    the multi-root entry points of [Multi.v] ([match_multi_u] /
    [match_all_multi_u] with the graph's users table [users_map], computed
    once per graph, which are [match_multi] / [match_all_multi];
    [match_multi_idx] / [match_all_multi_idx], the index-only candidates;
    the checks [wf_multi] and [mp_scoped]) and
    the checks [wf_defs] and [value_ok], the rewrite validator
    [Rewrite.validate] and the firing-certificate checker
    [Certify.validate_firings]; [match_root], [match_all],
    [candidates], [candidates_at], [root_index], [set_match_all] and
    [match_pattern] are
    extracted for the
    OCaml tests, which compare the prepared forms with them. *)

From Coq Require Import ZArith Extraction ExtrOcamlBasic ExtrOcamlNatInt ExtrOcamlZInt.
From PyPM Require Import Syntax Subst Declarative Values Algorithmic Interpreter RootIndex KidIndex Entry Multi Dominates Rewrite Certify.

(** An axiom left to realize would be an unproved assumption in the
    extracted code: make it an error, not a warning. *)
Set Warnings "+extraction-axiom-to-realize".
Set Warnings "+extraction-opaque-accessed".

Extraction Language OCaml.

(** ExtrOcamlZInt still names OCaml's deprecated [Pervasives] module and
    leaves [Z.eqb]/[Z.ltb]/[Z.leb] as case analyses: realize them by [Stdlib]
    (on [int]s, which these are). *)
Extract Constant Pos.succ => "Stdlib.succ".
(** The library realizations use OCaml's polymorphic comparisons ([(=)],
    [(<)], [Stdlib.max], [Stdlib.min]) in definitions whose type OCaml
    infers as polymorphic: each use is then a call of the runtime's generic
    [compare] (the old AVL maps' balancing, [pred], the key comparisons were
    most of the validator's time). Realize each on [int], annotated, with
    the same meaning: the arithmetic of [int]s in range. *)
Extract Constant Z.max => "fun (x : int) (y : int) -> if x >= y then x else y".
Extract Constant Z.min => "fun (x : int) (y : int) -> if x <= y then x else y".
Extract Constant Pos.max => "fun (x : int) (y : int) -> if x >= y then x else y".
Extract Constant Pos.min => "fun (x : int) (y : int) -> if x <= y then x else y".
Extract Constant Z.compare =>
  "fun (x : int) (y : int) -> if x = y then Eq else if x < y then Lt else Gt".
Extract Constant Pos.compare =>
  "fun (x : int) (y : int) -> if x = y then Eq else if x < y then Lt else Gt".
Extract Constant Pos.compare_cont =>
  "fun c (x : int) (y : int) -> if x = y then c else if x < y then Lt else Gt".
Extract Constant pred => "fun (n : int) -> if n > 0 then n - 1 else 0".
Extract Constant minus => "fun (n : int) (m : int) -> if n > m then n - m else 0".
Extract Inlined Constant max => "(fun (x : int) (y : int) -> if x >= y then x else y)".
Extract Inlined Constant min => "(fun (x : int) (y : int) -> if x <= y then x else y)".
Extract Inlined Constant Peano_dec.eq_nat_dec => "Int.equal".
Extract Inlined Constant EqNat.eq_nat_decide => "Int.equal".
Extract Inlined Constant Compare_dec.leb => "(fun (x : int) (y : int) -> x <= y)".
Extract Inlined Constant Compare_dec.le_lt_dec => "(fun (x : int) (y : int) -> x <= y)".
Extract Inlined Constant Compare_dec.lt_dec => "(fun (x : int) (y : int) -> x < y)".
Extract Inlined Constant Z.eqb => "Int.equal".
(** ExtrOcamlNatInt realizes [Nat.eqb] by the polymorphic [(=)], which is a
    call of the runtime's generic comparison wherever OCaml cannot see that
    the operands are ints (e.g. [memb]): use [Int.equal]. *)
Extract Inlined Constant Nat.eqb => "Int.equal".
(** The same for [Nat.compare]. *)
Extract Constant Nat.compare =>
  "fun (n : int) (m : int) -> if n = m then Eq else if n < m then Lt else Gt".
(** The finite maps ([Subst.VarMap]) are binary tries keyed by
    [Pos.of_succ_nat k]: with [nat] and [positive] both [int], that is
    [k + 1]; the recursive definition (one [Pos.succ] per unit of [k])
    would be [k] steps per lookup. *)
Extract Inlined Constant Pos.of_succ_nat => "Stdlib.succ".
Extract Inlined Constant Z.ltb => "(fun (x : int) (y : int) -> x < y)".
(** [Nat.ltb] (the candidates' bound check [c < N]) likewise. *)
Extract Inlined Constant Nat.ltb => "(fun (x : int) (y : int) -> x < y)".
Extract Inlined Constant Z.leb => "(fun (x : int) (y : int) -> x <= y)".
Extract Inlined Constant Nat.leb => "(fun (x : int) (y : int) -> x <= y)".

(** The validators' read-only tables ([Rewrite.rtab]: a list in Coq, read
    with [nth_error]) are OCaml arrays: [Rewrite.table] is [Array.of_list]
    and [Rewrite.rfind t i] reads position [i] if [0 <= i < length t]
    ([i], a [nat], is never negative), else [None] -- [nth_error] on an
    array, a trusted equivalence of the same kind as [nat] as [int]. Its
    field [rt_list] is never extracted (the extracted code reads a table
    only through [rfind]; OCaml's type checker would refuse a list used as
    an array). *)
Extract Inductive Rewrite.rtab => "array" [ "Array.of_list" ].
Extract Inlined Constant Rewrite.table => "Array.of_list".
Extract Constant Rewrite.rfind =>
  "(fun t i -> if i < Array.length t then Some (Array.unsafe_get t i) else None)".

Extraction "ocaml/extracted/matcher.ml"
  load_set set_match set_match_all set_match_all_fold set_candidates effective_fuel
  kid_table set_candidates_at candidates_at kid_syms label
  wfb wf_defs value_ok
  match_root match_all candidates root_index ri_find sym_attrs match_pattern
  lookup mkGraph mkDef
  mkMpat bodies wf_multi mp_scoped mcands match_multi_c match_multi match_all_multi
  users_map anchor_depth up_cands idx_cands match_multi_u match_all_multi_u
  match_multi_idx match_all_multi_idx
  dom_result dom_all
  validate validate_firings.
