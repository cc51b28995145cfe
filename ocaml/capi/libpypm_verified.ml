(* Main module of libpypm_verified.so: registers the implementations of the
   internal entry points (capi_bindings.ml) with the C stubs when the OCaml
   runtime starts (caml_startup in pypm_capi.c). *)

include Pypm_capi_bindings.Capi_bindings.Make (Pypm_stubs_gen_ml)
