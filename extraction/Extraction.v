(** * Extraction of the executable matcher to one OCaml module

    Node, symbol, variable and attribute ids and fuel are [nat] in Coq and
    native OCaml [int]s here (ExtrOcamlNatInt); guard arithmetic over [Z]
    uses native ints too (ExtrOcamlZInt). Both are part of the trusted base:
    the decoder only accepts ids in [0, 2^62), and guard arithmetic is exact
    as long as no intermediate value leaves the 63-bit range (shapes and
    dtype codes are far below it). bool, option, list and pairs map to
    OCaml's own types (ExtrOcamlBasic). *)

From Coq Require Import ZArith Extraction ExtrOcamlBasic ExtrOcamlNatInt ExtrOcamlZInt.
From PyPM Require Import Syntax Subst Declarative Algorithmic Interpreter.

(** An axiom left to realize would be an unproved assumption in the
    extracted code: make it an error, not a warning. *)
Set Warnings "+extraction-axiom-to-realize".
Set Warnings "+extraction-opaque-accessed".

Extraction Language OCaml.

(** ExtrOcamlZInt still names OCaml's deprecated [Pervasives] module and
    leaves [Z.eqb]/[Z.ltb] as case analyses: realize them by [Stdlib]. *)
Extract Constant Pos.succ => "Stdlib.succ".
Extract Constant Z.max => "Stdlib.max".
Extract Inlined Constant Z.eqb => "(=)".
Extract Inlined Constant Z.ltb => "(<)".

Extraction "ocaml/extracted/matcher.ml"
  match_pattern wfb wf_defs lookup VarMap.elements mkGraph mkDef.
