(* Writes the inverted stubs for Capi_bindings into the current directory:
   pypm_stubs_gen.c, pypm_stubs_gen.h (C side) and pypm_stubs_gen_ml.ml
   (OCaml side, registers the implementations with Callback.register). *)

let with_file name f =
  let oc = open_out name in
  let fmt = Format.formatter_of_out_channel oc in
  f fmt;
  Format.pp_print_flush fmt ();
  close_out oc

let () =
  let prefix = "pypmi" in
  let bindings = (module Pypm_capi_bindings.Capi_bindings.Make : Cstubs_inverted.BINDINGS) in
  with_file "pypm_stubs_gen.h" (fun fmt ->
      Format.fprintf fmt "#ifndef PYPM_STUBS_GEN_H@\n#define PYPM_STUBS_GEN_H@\n#include <stdint.h>@\n";
      Cstubs_inverted.write_c_header fmt ~prefix bindings;
      Format.fprintf fmt "@\n#endif@\n");
  with_file "pypm_stubs_gen.c" (fun fmt ->
      Format.fprintf fmt "#include \"pypm_stubs_gen.h\"@\n";
      Cstubs_inverted.write_c fmt ~prefix bindings);
  with_file "pypm_stubs_gen_ml.ml" (fun fmt ->
      (* generated code: silence its warnings (and only its) *)
      Format.fprintf fmt "[@@@@@@ocaml.warning \"-a\"]@\n";
      Cstubs_inverted.write_ml fmt ~prefix bindings)
