(* Internal C entry points, exported with Cstubs_inverted.  The generator
   (gen/gen.ml) writes the C stubs pypm_stubs_gen.{c,h} and the OCaml module
   pypm_stubs_gen_ml.ml that registers the functions; pypm_capi.c implements
   the public API (pypm_verified.h) on top of these pypmi_* functions. *)

open Ctypes

module Make (I : Cstubs_inverted.INTERNAL) = struct
  let () =
    I.internal "pypmi_format_version" (void @-> returning int64_t) Capi_impl.format_version

  let () =
    I.internal "pypmi_graph_load"
      (ptr int64_t @-> int64_t @-> ptr int64_t @-> returning int)
      Capi_impl.graph_load

  let () =
    I.internal "pypmi_graph_extend"
      (int64_t @-> ptr int64_t @-> int64_t @-> returning int)
      Capi_impl.graph_extend

  let () =
    I.internal "pypmi_patterns_load"
      (ptr int64_t @-> int64_t @-> ptr int64_t @-> returning int)
      Capi_impl.patterns_load

  let () =
    I.internal "pypmi_handle_size" (int64_t @-> ptr int64_t @-> returning int) Capi_impl.handle_size

  let () = I.internal "pypmi_release" (int64_t @-> returning int) Capi_impl.release

  let () =
    I.internal "pypmi_match"
      (int64_t @-> int64_t @-> int64_t @-> int64_t @-> int64_t @-> ptr int64_t @-> int64_t
     @-> ptr int64_t @-> returning int)
      Capi_impl.match_

  let () =
    I.internal "pypmi_match_all"
      (int64_t @-> int64_t @-> int64_t @-> ptr int64_t @-> ptr int64_t @-> returning int)
      Capi_impl.match_all

  let () =
    I.internal "pypmi_match_multi"
      (int64_t @-> int64_t @-> ptr int64_t @-> int64_t @-> int64_t @-> int64_t @-> ptr int64_t
     @-> ptr int64_t @-> returning int)
      Capi_impl.match_multi

  let () =
    I.internal "pypmi_dominates"
      (int64_t @-> int64_t @-> ptr int64_t @-> int64_t @-> int64_t @-> int64_t @-> ptr int64_t
     @-> ptr int64_t @-> returning int)
      Capi_impl.dominates

  let () =
    I.internal "pypmi_result_read"
      (int64_t @-> ptr int64_t @-> int64_t @-> returning int)
      Capi_impl.result_read

  let () =
    I.internal "pypmi_candidates"
      (int64_t @-> int64_t @-> ptr int64_t @-> int64_t @-> ptr int64_t @-> int64_t @-> ptr int64_t
       @-> returning int)
      Capi_impl.candidates

  let () =
    I.internal "pypmi_candidates_at"
      (int64_t @-> int64_t @-> ptr int64_t @-> int64_t @-> ptr int64_t @-> int64_t
     @-> ptr int64_t @-> int64_t @-> ptr int64_t @-> returning int)
      Capi_impl.candidates_at

  let () =
    I.internal "pypmi_validate_rewrite"
      (ptr int64_t @-> int64_t @-> ptr int64_t @-> ptr int64_t @-> returning int)
      Capi_impl.validate_rewrite

  let () =
    I.internal "pypmi_validate_firings"
      (int64_t @-> int64_t @-> int64_t @-> ptr int64_t @-> int64_t @-> ptr int64_t @-> ptr int64_t
     @-> returning int)
      Capi_impl.validate_firings

  let () =
    I.internal "pypmi_last_message" (ptr char @-> int64_t @-> returning int64_t)
      Capi_impl.last_message_copy
end
