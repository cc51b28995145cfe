(* The C header and the OCaml side agree: capi/pypm_verified.h defines
   exactly the PYPM_* codes of [Codes.all], with the same values, and
   pypm_capi.c's FORMAT_VERSION is the reader's [Decode.version]. *)

open Pypm_core

let lines path =
  let ic = open_in path in
  let rec go acc = match input_line ic with l -> go (l :: acc) | exception End_of_file -> List.rev acc in
  let l = go [] in
  close_in ic;
  l

(* [#define NAME VALUE ...] lines whose NAME starts with [prefix]:
   (NAME, VALUE) *)
let defines prefix path =
  List.filter_map
    (fun l ->
      match String.split_on_char ' ' l |> List.filter (( <> ) "") with
      | "#define" :: name :: v :: _
        when String.length name >= String.length prefix
             && String.sub name 0 (String.length prefix) = prefix ->
          Some (name, int_of_string v)
      | _ -> None)
    (lines path)

let () =
  let failures = ref 0 in
  let fail fmt = Printf.ksprintf (fun s -> incr failures; print_endline ("FAIL: " ^ s)) fmt in
  let header = defines "PYPM_" "../capi/pypm_verified.h" in
  List.iter
    (fun (name, v) ->
      match List.assoc_opt name header with
      | None -> fail "%s = %d (codes.ml) is not defined in pypm_verified.h" name v
      | Some v' when v' <> v -> fail "%s: codes.ml says %d, pypm_verified.h says %d" name v v'
      | Some _ -> ())
    Codes.all;
  List.iter
    (fun (name, v) ->
      if not (List.mem_assoc name Codes.all) then
        fail "%s = %d (pypm_verified.h) is missing from codes.ml" name v)
    header;
  (match defines "FORMAT_VERSION" "../capi/pypm_capi.c" with
  | [ ("FORMAT_VERSION", v) ] when Int64.of_int v = Decode.version -> ()
  | [ ("FORMAT_VERSION", v) ] -> fail "pypm_capi.c: FORMAT_VERSION %d, decode.ml: %Ld" v Decode.version
  | _ -> fail "pypm_capi.c: no single #define FORMAT_VERSION");
  Printf.printf "test_codes: %d codes, %d failures\n" (List.length header) !failures;
  if !failures > 0 then exit 1
