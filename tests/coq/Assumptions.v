(* Golden check (fiat-crypto style): the main theorems depend on no axiom.
   `make proofs` compares this file's output with assumptions.golden. *)
From PyPM Require Import Declarative Frame Values Interpreter Soundness Priority RootIndex Entry Fuel Multi Spec Dominates Certify Window.
Print Assumptions match_weakening.
Print Assumptions success_soundness.
Print Assumptions failure_soundness.
Print Assumptions run_refines_success.
Print Assumptions run_refines_failure.
Print Assumptions run_complete.
Print Assumptions match_pattern_sound.
Print Assumptions match_pattern_fail_sound.
Print Assumptions run_out_of_fuel.
(* integers (Values.v) *)
Print Assumptions in_bound_abs.
Print Assumptions guard_arith_in_range.
Print Assumptions eval_expr_value_ok.
Print Assumptions bounds_value_ok.
(* the root-operator index (RootIndex.v) *)
Print Assumptions root_index_sound.
Print Assumptions root_index_no_match.
Print Assumptions guard_class_sound.
(* the frame of a match (Frame.v) *)
Print Assumptions matches_frame.
(* the entry points (Entry.v) *)
Print Assumptions match_root_sound.
Print Assumptions match_root_index_no.
Print Assumptions match_root_fail_sound.
Print Assumptions match_root_out_of_fuel.
Print Assumptions match_root_decided.
Print Assumptions match_root_complete.
Print Assumptions match_all_In.
Print Assumptions match_all_S.
Print Assumptions candidates_In.
Print Assumptions candidates_sound.
Print Assumptions load_set_some.
Print Assumptions set_match_correct.
Print Assumptions set_match_all_correct.
Print Assumptions set_match_all_fold_correct.
Print Assumptions set_candidates_correct.
(* which answer: the priority specification (Priority.v) *)
Print Assumptions solutions_sound.
Print Assumptions ksols_solutions.
Print Assumptions ksols_behaves.
Print Assumptions first_solution.
Print Assumptions first_solution_complete.
Print Assumptions match_root_first.
Print Assumptions match_root_none_first.
Print Assumptions psols_sound.
Print Assumptions WKB_all.
Print Assumptions first_solution_k.
Print Assumptions first_solution_k_complete.
Print Assumptions solutions_k_cut.
Print Assumptions first_solution_k_stable.
Print Assumptions solutions_k_sound.
Print Assumptions solutions_k_nil.
Print Assumptions solutions_k_frag.
Print Assumptions solutions_k_mono.
Print Assumptions match_root_first_k.
Print Assumptions match_root_none_k.
(* fuel that suffices (Fuel.v) *)
Print Assumptions cost_sound.
Print Assumptions match_pattern_fuel.
Print Assumptions match_root_fuel.
Print Assumptions match_root_fuel_complete.
(* multi-root patterns (Multi.v) *)
Print Assumptions match_multi_sound.
Print Assumptions match_multi_fail_sound.
Print Assumptions mmatches_one.
Print Assumptions mmatches_perm.
Print Assumptions match_all_multi_sound.
Print Assumptions match_all_multi_once.
Print Assumptions match_all_multi_sets.
Print Assumptions match_all_multi_first.
Print Assumptions match_multi_fuel.
Print Assumptions match_multi_fuel_complete.
Print Assumptions match_all_multi_fuel.
Print Assumptions match_all_multi_fuel_sets.
(* the specification file (Spec.v): each statement is proved *)
Print Assumptions spec_match_weakening.
Print Assumptions spec_match_pattern_sound.
Print Assumptions spec_match_pattern_fail_sound.
Print Assumptions spec_run_out_of_fuel.
Print Assumptions spec_solutions_sound.
Print Assumptions spec_first_solution.
Print Assumptions spec_first_solution_complete.
Print Assumptions spec_match_root_sound.
Print Assumptions spec_match_root_fail_sound.
Print Assumptions spec_root_index_no_match.
Print Assumptions spec_match_all_In.
Print Assumptions spec_candidates_sound.
Print Assumptions spec_match_root_first.
Print Assumptions spec_solutions_k_sound.
Print Assumptions spec_first_solution_k.
Print Assumptions spec_first_solution_k_complete.
Print Assumptions spec_solutions_k_cut.
Print Assumptions spec_first_solution_k_stable.
Print Assumptions spec_solutions_k_mono.
Print Assumptions spec_solutions_k_frag.
Print Assumptions spec_match_root_first_k.
Print Assumptions spec_set_match_correct.
Print Assumptions spec_set_match_all_correct.
Print Assumptions spec_match_pattern_fuel.
Print Assumptions spec_match_root_fuel.
Print Assumptions spec_match_root_complete.
Print Assumptions spec_match_multi_sound.
Print Assumptions spec_match_multi_fail_sound.
Print Assumptions spec_mmatches_one.
Print Assumptions spec_mmatches_perm.
Print Assumptions spec_match_all_multi_sound.
Print Assumptions spec_match_all_multi_once.
Print Assumptions spec_match_all_multi_sets.
Print Assumptions spec_match_all_multi_first.
Print Assumptions spec_match_multi_fuel.
Print Assumptions spec_match_multi_complete.
Print Assumptions spec_match_all_multi_fuel.
Print Assumptions spec_users_map_complete.
Print Assumptions spec_up_cands_complete.
Print Assumptions spec_match_multi_idx_sound.
Print Assumptions spec_match_multi_idx_fail_sound.
(* scope, constant-stack lists, which multi-root tuple *)
Print Assumptions matches_restrict.
Print Assumptions match_root_fail_sound_any.
Print Assumptions match_root_fuel_complete_any.
Print Assumptions search_first.
Print Assumptions spec_matches_params.
Print Assumptions spec_users_map_fold.
Print Assumptions spec_seq_tr.
Print Assumptions spec_filter_upto.
Print Assumptions spec_mall_rev.
Print Assumptions spec_match_multi_first.
(* multi-root theorems under any substitution (Multi.mp_scoped) *)
Print Assumptions mmatches_scope.
Print Assumptions match_multi_fail_sound_any.
Print Assumptions match_multi_idx_fail_sound_any.
Print Assumptions match_multi_first_any.
Print Assumptions match_all_multi_sets_any.
Print Assumptions match_all_multi_first_any.
Print Assumptions match_multi_fuel_complete_any.
Print Assumptions match_all_multi_fuel_sets_any.
Print Assumptions spec_mmatches_scope.
(* Relay's dominator pattern (Dominates.v) *)
Print Assumptions dom_check_correct.
Print Assumptions region_correct.
Print Assumptions region_dominated.
Print Assumptions dom_parent_correct.
Print Assumptions dom_check_sound.
Print Assumptions dom_core_correct.
Print Assumptions dom_all_correct.
Print Assumptions dom_all_map.
(* the rewrite step and its validator (Rewrite.v) *)
Print Assumptions spec_rewrite_wf.
Print Assumptions spec_rewrite_denote.
Print Assumptions spec_validate_rewrite_sound.
Print Assumptions spec_validate_rewrite_renaming.
Print Assumptions spec_validate_rewrite_replace.
(* the remaining entry points the C API calls (Spec.v) *)
Print Assumptions spec_set_match_all_fold_correct.
Print Assumptions spec_set_candidates_correct.
Print Assumptions spec_candidates_at_sound.
Print Assumptions spec_kid_index_sound.
Print Assumptions spec_set_candidates_at_correct.
Print Assumptions spec_dom_result.
Print Assumptions spec_dom_all_correct.
Print Assumptions spec_value_ok_iff.
Print Assumptions spec_eval_expr_value_ok.
Print Assumptions spec_guard_arith_in_range.
Print Assumptions spec_bounds_value_ok.
(* firing certificates (Certify.v) *)
Print Assumptions validate_firings_sound.
Print Assumptions rewrite_preserves.
Print Assumptions spec_validate_firings_sound.
Print Assumptions spec_rewrite_preserves.
(* a pass checked on the region it changed (Window.v) *)
Print Assumptions window_dnode.
Print Assumptions window_preserves.
Print Assumptions window_rewrite_preserves.
Print Assumptions window_whole.
