(* Golden check (fiat-crypto style): the main theorems depend on no axiom.
   `make proofs` compares this file's output with assumptions.golden. *)
From PyPM Require Import Declarative Interpreter Soundness.
Print Assumptions match_weakening.
Print Assumptions success_soundness.
Print Assumptions failure_soundness.
Print Assumptions run_refines_success.
Print Assumptions run_refines_failure.
Print Assumptions run_complete.
Print Assumptions match_pattern_sound.
Print Assumptions match_pattern_fail_sound.
Print Assumptions run_out_of_fuel.
