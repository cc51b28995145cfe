(* The return codes and match statuses of the C API: the OCaml side's one
   copy of the PYPM_* constants of capi/pypm_verified.h.  [all] lists them
   by their C names; test/test_codes.ml checks that the header defines
   exactly these, with these values. *)

let ok = 0
let e_malformed = 1
let e_bad_handle = 2
let e_out_of_range = 3
let e_buffer_too_small = 4
let e_ill_formed = 5
let e_too_deep = 6
let e_null = 7
let e_internal = 8
let e_init = 9 (* raised by pypm_capi.c only *)
let e_memory = 10

let status_match = 0
let status_no_match = 1
let status_out_of_fuel = 2

(* The verdicts of pypm_validate_rewrite (0: accepted), the reason codes of
   Rewrite.validate (R_BEFORE .. R_DEAD). *)
let reject_before_ill_formed = 1
let reject_after_ill_formed = 2
let reject_firing = 3
let reject_map = 4
let reject_node = 5
let reject_arg = 6
let reject_output = 7
let reject_dead = 8

(* The further verdicts of pypm_validate_firings, the reason codes of
   Certify.validate_firings (R_AGREE .. R_TEMPLATE). *)
let reject_agree = 9
let reject_certs = 10
let reject_match = 11
let reject_subst = 12
let reject_template = 13

let all =
  [
    ("PYPM_OK", ok);
    ("PYPM_E_MALFORMED", e_malformed);
    ("PYPM_E_BAD_HANDLE", e_bad_handle);
    ("PYPM_E_OUT_OF_RANGE", e_out_of_range);
    ("PYPM_E_BUFFER_TOO_SMALL", e_buffer_too_small);
    ("PYPM_E_ILL_FORMED", e_ill_formed);
    ("PYPM_E_TOO_DEEP", e_too_deep);
    ("PYPM_E_NULL", e_null);
    ("PYPM_E_INTERNAL", e_internal);
    ("PYPM_E_INIT", e_init);
    ("PYPM_E_MEMORY", e_memory);
    ("PYPM_STATUS_MATCH", status_match);
    ("PYPM_STATUS_NO_MATCH", status_no_match);
    ("PYPM_STATUS_OUT_OF_FUEL", status_out_of_fuel);
    ("PYPM_REJECT_BEFORE_ILL_FORMED", reject_before_ill_formed);
    ("PYPM_REJECT_AFTER_ILL_FORMED", reject_after_ill_formed);
    ("PYPM_REJECT_FIRING", reject_firing);
    ("PYPM_REJECT_MAP", reject_map);
    ("PYPM_REJECT_NODE", reject_node);
    ("PYPM_REJECT_ARG", reject_arg);
    ("PYPM_REJECT_OUTPUT", reject_output);
    ("PYPM_REJECT_DEAD", reject_dead);
    ("PYPM_REJECT_AGREE", reject_agree);
    ("PYPM_REJECT_CERTS", reject_certs);
    ("PYPM_REJECT_MATCH", reject_match);
    ("PYPM_REJECT_SUBST", reject_subst);
    ("PYPM_REJECT_TEMPLATE", reject_template);
  ]
