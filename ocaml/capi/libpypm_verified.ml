(* Main module of libpypm_verified.so: registers the implementations of the
   internal entry points (capi_bindings.ml) with the C stubs when the OCaml
   runtime starts (caml_startup in pypm_capi.c). *)

include Pypm_capi_bindings.Capi_bindings.Make (Pypm_stubs_gen_ml)

(* No automatic compaction. The live heap is small (the loaded graphs and
   pattern sets) and every graph load or match leaves garbage several times
   its size, so the runtime's default (compact when the free part exceeds
   500 % of the live part) compacted every few loads, gave the memory back
   and took it again page by page: a graph load of BERT-12 took 0.27 ms with
   it, 0.14 ms without. The heap still shrinks after a search stopped at
   the memory budget (Capi_impl.budgeted compacts it). An OCAMLRUNPARAM (or
   CAMLRUNPARAM) the user sets is left as it is. *)
let () =
  match (Sys.getenv_opt "OCAMLRUNPARAM", Sys.getenv_opt "CAMLRUNPARAM") with
  | None, None -> Gc.set { (Gc.get ()) with Gc.max_overhead = 1_000_000 }
  | _ -> ()
