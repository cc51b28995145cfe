(* The rewrite validator behind pypm_validate_rewrite: the decoder of its
   buffer (Decode_rewrite) refuses malformed buffers with a message, never
   raising, and the extracted Rewrite.validate gives each reason code on a
   hand-made pass. *)

open Pypm_core

let failures = ref 0

let fail fmt = Printf.ksprintf (fun s -> incr failures; print_endline ("FAIL: " ^ s)) fmt

let buf l = Decode.of_array (Array.of_list (List.map Int64.of_int l))

(* before: x; relu(x); neg(relu(x)) -> output 2.  The rule relu(x) -> gelu(x)
   fires at node 1; after: x; gelu(x) (new); neg(gelu(x)) -> output 2. *)
let before = [ 3; 0; 0; 1; 1; 0; 2; 1; 1; 1; 2 ]

let after_nodes = [ 0; 0; 3; 1; 0; 2; 1; 1 ]

let pass ?(before = before) ?(after_nodes = after_nodes) ?(n_after = 3) ?(outs = [ 2 ])
    ?(firings = [ (1, 1) ]) ?(map = [ 0; -1; 2 ]) () =
  before @ (n_after :: after_nodes) @ (List.length outs :: outs)
  @ (List.length firings :: List.concat_map (fun (r, p) -> [ r; p ]) firings)
  @ map

let expect name words (v, w) =
  match Decode_rewrite.decode (buf words) with
  | Error msg -> fail "%s: refused as malformed: %s" name msg
  | Ok t ->
      let v', w' = Decode_rewrite.verdict t in
      if (v', w') <> (v, w) then fail "%s: verdict (%d, %d), expected (%d, %d)" name v' w' v w

let malformed name words =
  match Decode_rewrite.decode (buf words) with
  | Ok _ -> fail "%s: accepted a malformed buffer" name
  | Error msg -> if msg = "" then fail "%s: empty message" name

let () =
  expect "accepted" (pass ()) (0, -1);
  (* identity pass: no firing, every node mapped to itself *)
  expect "identity" (pass ~after_nodes:[ 0; 0; 1; 1; 0; 2; 1; 1 ] ~firings:[] ~map:[ 0; 1; 2 ] ())
    (0, -1);
  expect "before ill formed"
    (pass ~before:[ 3; 0; 0; 1; 1; 1; 2; 1; 1; 1; 2 ] ())
    (Codes.reject_before_ill_formed, 1);
  expect "before output out of range"
    (pass ~before:[ 3; 0; 0; 1; 1; 0; 2; 1; 1; 1; 3 ] ())
    (Codes.reject_before_ill_formed, 3);
  expect "after output out of range" (pass ~outs:[ 5 ] ()) (Codes.reject_after_ill_formed, 3);
  expect "firing root out of range" (pass ~firings:[ (7, 1) ] ()) (Codes.reject_firing, 0);
  expect "firing roots repeated" (pass ~firings:[ (1, 1); (1, 1) ] ()) (Codes.reject_firing, 1);
  expect "map names a fired root" (pass ~map:[ 0; 1; 2 ] ()) (Codes.reject_map, 1);
  expect "map not injective" (pass ~map:[ 0; -1; 0 ] ()) (Codes.reject_map, 2);
  expect "map out of range" (pass ~map:[ 0; -1; 9 ] ()) (Codes.reject_map, 2);
  expect "label differs"
    (pass ~after_nodes:[ 0; 0; 3; 1; 0; 4; 1; 1 ] ())
    (Codes.reject_node, 2);
  expect "use not redirected"
    (pass ~after_nodes:[ 0; 0; 3; 1; 0; 2; 1; 0 ] ())
    (Codes.reject_arg, 2);
  expect "output counts differ" (pass ~outs:[ 2; 2 ] ()) (Codes.reject_output, -1);
  expect "output not the image" (pass ~outs:[ 1 ] ()) (Codes.reject_output, 0);
  expect "dead node left"
    (pass ~n_after:4 ~after_nodes:(after_nodes @ [ 5; 0 ]) ~map:[ 0; -1; 2; -1 ] ())
    (Codes.reject_dead, 3);
  malformed "empty" [];
  malformed "negative count" [ -1 ];
  malformed "count above the words left" [ 5; 0; 0 ];
  malformed "label out of range" (pass ~before:[ 3; -5; 0; 1; 1; 0; 2; 1; 1; 1; 2 ] ());
  malformed "negative arity" (pass ~before:[ 3; 0; -1; 1; 1; 0; 2; 1; 1; 1; 2 ] ());
  malformed "argument out of range" (pass ~before:[ 3; 0; 0; 1; 1; -1; 2; 1; 1; 1; 2 ] ());
  malformed "map entry -2" (pass ~map:[ 0; -2; 2 ] ());
  malformed "trailing word" (pass () @ [ 0 ]);
  malformed "map truncated" (pass ~map:[ 0; -1 ] ());
  malformed "word at 2^62" (pass ~map:[ 0; -1; 1 lsl 62 ] ());
  (* every prefix of a valid buffer is refused, never raising *)
  let full = pass () in
  List.iteri
    (fun i _ -> if i < List.length full then malformed (Printf.sprintf "prefix %d" i) (List.filteri (fun j _ -> j < i) full))
    full;
  (* random buffers: decode and validate never raise *)
  Random.init 7;
  for _ = 1 to 20_000 do
    let n = Random.int 24 in
    let words = List.init n (fun _ -> Random.int 7 - 1) in
    match Decode_rewrite.decode (buf words) with
    | Ok t -> ignore (Decode_rewrite.verdict t)
    | Error _ -> ()
    | exception e -> fail "random buffer: exception %s" (Printexc.to_string e)
  done;
  (* the hints (Decode_rewrite.hints): any hints are safe (the theorems hold
     for all; here: never an exception), and the glue's are complete: a pass
     some hints get accepted is accepted with the glue's. Random identity
     passes over random graphs (reached from the outputs or not), checked
     with the glue's hints, with each of them perturbed, and with random
     ones. *)
  Random.init 11;
  let some_accepted = ref 0 in
  for _ = 1 to 20_000 do
    let n = 1 + Random.int 7 in
    let nodes =
      List.init n (fun i ->
          let k = if i = 0 then 0 else Random.int 3 in
          Matcher.{ tlabel = Random.int 3; targs = List.init k (fun _ -> Random.int i) })
    in
    let outs = List.init (1 + Random.int 2) (fun _ -> Random.int n) in
    let g = Matcher.{ tnodes = nodes; touts = outs } in
    let t = Decode_rewrite.{ before = g; after = g; firings = []; map = List.init n (fun i -> Some i) } in
    let canonical = Decode_rewrite.verdict t in
    let fi, mi, us = Decode_rewrite.hints t in
    let check what mi us =
      match Matcher.validate t.before t.after t.firings t.map fi mi us with
      | None ->
          incr some_accepted;
          if canonical <> (0, -1) then fail "hints: %s accepted, the glue's hints rejected" what
      | Some _ -> ()
      | exception e -> fail "hints: %s: exception %s" what (Printexc.to_string e)
    in
    check "the glue's" mi us;
    let perturb a = let a = Array.copy a in
      if Array.length a > 0 then a.(Random.int (Array.length a)) <- Random.int (2 * n + 2); a in
    check "perturbed" (perturb mi) us;
    check "perturbed" mi (perturb us);
    check "random" (Array.init (Random.int (n + 2)) (fun _ -> Random.int (n + 2)))
      (Array.init (Random.int (n + 2)) (fun _ -> Random.int (2 * n + 2)))
  done;
  if !some_accepted < 1000 then fail "hints: only %d passes accepted (vacuous)" !some_accepted;
  (* a long chain, identity pass: the validator is tail recursive (no stack
     overflow) and n log n *)
  let n = 200_000 in
  let words = ref [] in
  let push x = words := Int64.of_int x :: !words in
  for _ = 1 to 2 do
    push n;
    for i = 0 to n - 1 do
      if i = 0 then (push 0; push 0) else (push 1; push 1; push (i - 1))
    done;
    push 1;
    push (n - 1)
  done;
  push 0;
  for i = 0 to n - 1 do push i done;
  let b = Decode.of_array (Array.of_list (List.rev !words)) in
  let t0 = Sys.time () in
  (match Decode_rewrite.decode b with
   | Error msg -> fail "long chain: refused: %s" msg
   | Ok t ->
       let v = Decode_rewrite.verdict t in
       if v <> (0, -1) then fail "long chain: verdict (%d, %d)" (fst v) (snd v));
  Printf.printf "test_rewrite: chain of %d nodes decoded and validated in %.2fs\n" n
    (Sys.time () -. t0);
  Printf.printf "test_rewrite: %d failures\n" !failures;
  if !failures > 0 then exit 1
