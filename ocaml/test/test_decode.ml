(* Tests of the decoder (and of the engine on decoded values), plain OCaml.
   Valid buffers decode to the expected values; each class of malformed
   buffer is rejected with the right kind and a precise message. *)

open Pypm_core
module M = Matcher

let failures = ref 0
let checks = ref 0

let check name cond =
  incr checks;
  if not cond then begin
    incr failures;
    Printf.printf "FAIL: %s\n%!" name
  end

let contains s sub =
  let n = String.length s and m = String.length sub in
  let rec go i = i + m <= n && (String.sub s i m = sub || go (i + 1)) in
  go 0

(* ------------------------------------------------------------ encoders *)

let i = Int64.of_int

let graph_words (nodes : (int * int list * (int * int) list) list) : int64 list =
  [ Decode.magic_graph; 1L; i (List.length nodes) ]
  @ List.concat_map
      (fun (l, kids, attrs) ->
        [ i l; i (List.length kids) ]
        @ List.map i kids
        @ [ i (List.length attrs) ]
        @ List.concat_map (fun (a, v) -> [ i a; i v ]) attrs)
      nodes

let rec expr_words = function
  | M.EConst z -> [ 1L; i z ]
  | M.EAttr (x, a) -> [ 2L; i x; i a ]
  | M.EAdd (a, b) -> (3L :: expr_words a) @ expr_words b
  | M.ESub (a, b) -> (4L :: expr_words a) @ expr_words b
  | M.EMul (a, b) -> (5L :: expr_words a) @ expr_words b

let rec guard_words = function
  | M.GTrue -> [ 1L ]
  | M.GEq (a, b) -> (2L :: expr_words a) @ expr_words b
  | M.GLt (a, b) -> (3L :: expr_words a) @ expr_words b
  | M.GAnd (a, b) -> (4L :: guard_words a) @ guard_words b
  | M.GOr (a, b) -> (5L :: guard_words a) @ guard_words b
  | M.GNot a -> 6L :: guard_words a

let rec pattern_words = function
  | M.PVar x -> [ 1L; i x ]
  | M.PApp (f, ps) -> [ 2L; i f; i (List.length ps) ] @ List.concat_map pattern_words ps
  | M.PAlt (a, b) -> (3L :: pattern_words a) @ pattern_words b
  | M.PGuard (p, g) -> (4L :: pattern_words p) @ guard_words g

let patterns_words_raw (ps : int64 list list) : int64 list =
  [ Decode.magic_patterns; 1L; i (List.length ps) ]
  @ List.concat_map (fun w -> i (List.length w) :: w) ps

let patterns_words ps = patterns_words_raw (List.map pattern_words ps)

let buf l = Decode.of_array (Array.of_list l)

(* ------------------------------------------------------------ fixtures *)

(* symbols *)
let matmul = 1
let trans = 2
let leaf = 10

(* x(0), y(1), Trans(y)(2), MatMul(x, Trans y)(3), MatMul(x, y)(4) *)
let g_nodes =
  [
    (leaf, [], [ (0, 2); (1, 1); (100, 4); (101, 8) ]);
    (leaf, [], [ (0, 2); (1, 1); (101, 4); (100, 8) ]);
    (trans, [ 1 ], [ (0, 2) ]);
    (matmul, [ 0; 2 ], []);
    (matmul, [ 0; 1 ], [ (1, 1) ]);
  ]

let x = 0
let y = 1

(* MatMul(x, Trans(y)) *)
let p_mmt = M.PApp (matmul, [ M.PVar x; M.PApp (trans, [ M.PVar y ]) ])

(* ... ; guard(x.shape[1] = y.shape[1]) *)
let p_guarded = M.PGuard (p_mmt, M.GEq (M.EAttr (x, 101), M.EAttr (y, 101)))

(* MatMul(x, Trans(y) | y) *)
let p_alt = M.PApp (matmul, [ M.PVar x; M.PAlt (M.PApp (trans, [ M.PVar y ]), M.PVar y) ])

let expect_error what kind sub = function
  | Ok _ -> check (what ^ ": expected an error") false
  | Error { Decode.kind = k; message } ->
      check
        (Printf.sprintf "%s: kind %s, expected %s (message: %s)" what (Decode.kind_name k)
           (Decode.kind_name kind) message)
        (k = kind);
      check (Printf.sprintf "%s: message %S should contain %S" what message sub) (contains message sub)

(* ------------------------------------------------------------ graph tests *)

let test_graph_valid () =
  match Decode.decode_graph (buf (graph_words g_nodes)) with
  | Error e -> check ("valid graph: " ^ e.Decode.message) false
  | Ok g ->
      check "n_nodes" (g.Repr.n_nodes = 5);
      check "labels" (g.Repr.labels = [| leaf; leaf; trans; matmul; matmul |]);
      check "children" (g.Repr.children = [| []; []; [ 1 ]; [ 0; 2 ]; [ 0; 1 ] |]);
      check "attr present" (Repr.attr g 101 0 = Some 8);
      check "attr present (unsorted input)" (Repr.attr g 100 1 = Some 8);
      check "attr absent" (Repr.attr g 102 0 = None);
      check "attr on node without attrs" (Repr.attr g 0 3 = None);
      check "attr out-of-range node" (Repr.attr g 0 99 = None);
      (* many attributes (sorted with Array.sort) *)
      let attrs = List.init 40 (fun k -> ((k * 7919) mod 1000, k)) in
      (match Decode.decode_graph (buf (graph_words [ (5, [], attrs) ])) with
      | Ok g2 ->
          check "40 attributes"
            (List.for_all (fun (a, v) -> Repr.attr g2 a 0 = Some v) attrs
            && Repr.attr g2 1001 0 = None)
      | Error e -> check ("40 attributes: " ^ e.Decode.message) false);
      (* empty graph, cycles, self loops are legal *)
      check "empty graph" (Result.is_ok (Decode.decode_graph (buf (graph_words []))));
      check "cycle"
        (Result.is_ok (Decode.decode_graph (buf (graph_words [ (1, [ 1 ], []); (1, [ 0; 0 ], []) ]))));
      check "extreme values"
        (Result.is_ok
           (Decode.decode_graph
              (buf
                 ([ Decode.magic_graph; 1L; 1L; 0x3FFFFFFFFFFFFFFFL; 0L; 2L ]
                 @ [ 0x3FFFFFFFFFFFFFFFL; 0x3FFFFFFFFFFFFFFFL; 0L; Int64.neg 0x4000000000000000L ]))))

let test_graph_malformed () =
  let g = graph_words g_nodes in
  let with_words f = buf (f (Array.of_list g) |> Array.to_list) in
  let set k v a =
    a.(k) <- v;
    a
  in
  let dg = Decode.decode_graph in
  let mal what sub b = expect_error what Decode.Malformed sub (dg b) in
  mal "empty" "buffer has 0 words" (buf []);
  mal "short header" "header needs 3" (buf [ Decode.magic_graph; 1L ]);
  mal "bad magic" "bad magic" (with_words (set 0 0x1234L));
  mal "pattern magic in graph" "bad magic" (with_words (set 0 Decode.magic_patterns));
  mal "bad version" "unsupported format version 2" (with_words (set 1 2L));
  mal "negative n" "negative node count -1" (with_words (set 2 (-1L)));
  mal "n too large" "truncated: 1000 nodes announced" (with_words (set 2 1000L));
  mal "huge n" "nodes announced" (with_words (set 2 Int64.max_int));
  (* node 0 starts at word 3: label, n_children *)
  mal "negative label" "graph: node 0: label -1 out of range [0, 2^62)" (with_words (set 3 (-1L)));
  mal "label 2^62" "label 4611686018427387904 out of range" (with_words (set 3 0x4000000000000000L));
  mal "negative n_children" "graph: node 0: negative number of children -3"
    (with_words (set 4 (-3L)));
  mal "too many children" "truncated: 100 children announced" (with_words (set 4 100L));
  mal "child out of range" "graph: node 3: child 99 out of range [0, 5)"
    (buf
       (graph_words
          [ (leaf, [], []); (leaf, [], []); (trans, [ 1 ], []); (matmul, [ 0; 99 ], []); (1, [], []) ]));
  mal "negative child" "graph: node 1: child -1 out of range [0, 2)"
    (buf (graph_words [ (leaf, [], []); (leaf, [ -1 ], []) ]));
  mal "child = n" "child 2 out of range [0, 2)" (buf (graph_words [ (leaf, [ 2 ], []); (leaf, [], []) ]));
  mal "negative n_attrs" "graph: node 0: negative number of attributes -1"
    (buf [ Decode.magic_graph; 1L; 1L; 5L; 0L; -1L ]);
  mal "n_attrs beyond buffer" "truncated: 2 attributes announced"
    (buf [ Decode.magic_graph; 1L; 1L; 5L; 0L; 2L; 0L; 1L; 1L ]);
  mal "attr id out of range" "graph: node 0: attribute id -4 out of range"
    (buf [ Decode.magic_graph; 1L; 1L; 5L; 0L; 1L; -4L; 1L ]);
  mal "attr value out of range" "value 4611686018427387904 outside the 63-bit range"
    (buf [ Decode.magic_graph; 1L; 1L; 5L; 0L; 1L; 4L; 0x4000000000000000L ]);
  mal "attr value min_int64" "outside the 63-bit range"
    (buf [ Decode.magic_graph; 1L; 1L; 5L; 0L; 1L; 4L; Int64.min_int ]);
  mal "duplicate attr" "graph: node 1: duplicate attribute id 100"
    (buf (graph_words [ (leaf, [], []); (leaf, [], [ (100, 1); (0, 2); (100, 3) ]) ]));
  mal "duplicate attr (large node)" "graph: node 0: duplicate attribute id 7"
    (buf (graph_words [ (leaf, [], List.init 30 (fun k -> (k, k)) @ [ (7, 0) ]) ]));
  mal "trailing word" "graph: 1 trailing words after the last node" (buf (g @ [ 0L ]));
  mal "trailing words (n too small)" "trailing words" (with_words (set 2 4L));
  (* arity limit (arrays: these buffers are too long for non-tail-recursive list code) *)
  let star n = Array.concat [ [| Decode.magic_graph; 1L; 1L; 5L; i n |]; Array.make n 0L; [| 0L |] ] in
  let big = Decode.max_arity + 1 in
  mal "arity limit" (Printf.sprintf "%d children exceed the limit of %d" big Decode.max_arity)
    (Decode.of_array (star big));
  check "arity at the limit" (Result.is_ok (dg (Decode.of_array (star Decode.max_arity))));
  (* every proper prefix of a valid buffer is malformed *)
  let a = Array.of_list g in
  for k = 0 to Array.length a - 1 do
    match dg (Decode.of_array (Array.sub a 0 k)) with
    | Ok _ -> check (Printf.sprintf "graph prefix %d accepted" k) false
    | Error e -> check (Printf.sprintf "graph prefix %d kind" k) (e.Decode.kind = Decode.Malformed)
  done

(* --------------------------------------------------------- pattern tests *)

let test_patterns_valid () =
  let ps =
    [
      p_mmt;
      p_guarded;
      p_alt;
      M.PVar 7;
      M.PApp (5, []);
      M.PGuard
        ( M.PVar 3,
          M.GOr
            ( M.GNot (M.GLt (M.EConst (-5), M.ESub (M.EAttr (3, 0), M.EConst 4611686018427387903))),
              M.GAnd (M.GTrue, M.GEq (M.EMul (M.EConst 2, M.EAttr (3, 1)), M.EAdd (M.EConst 1, M.EConst 1)))
            ) );
      (* guard under an alternate, variables bound on both sides *)
      M.PGuard (M.PAlt (M.PVar 1, M.PApp (2, [ M.PVar 1 ])), M.GEq (M.EAttr (1, 0), M.EConst 2));
    ]
  in
  match Decode.decode_patterns (buf (patterns_words ps)) with
  | Error e -> check ("valid patterns: " ^ e.Decode.message) false
  | Ok a -> check "patterns round-trip" (Array.to_list a = ps)

let test_patterns_malformed () =
  let dp = Decode.decode_patterns in
  let mal what sub b = expect_error what Decode.Malformed sub (dp b) in
  let pw = patterns_words [ p_mmt ] in
  let with_words f = buf (f (Array.of_list pw) |> Array.to_list) in
  let set k v a =
    a.(k) <- v;
    a
  in
  let one ws = buf (patterns_words_raw [ ws ]) in
  mal "empty" "buffer has 0 words" (buf []);
  mal "bad magic" "bad magic" (with_words (set 0 Decode.magic_graph));
  mal "bad version" "unsupported format version 0" (with_words (set 1 0L));
  mal "negative count" "negative pattern count -2" (with_words (set 2 (-2L)));
  mal "count too large" "truncated: 9 patterns announced" (with_words (set 2 9L));
  mal "negative length" "pattern 0: word 3: negative length -1" (with_words (set 3 (-1L)));
  mal "length beyond buffer" "pattern 0: truncated: 11 words announced" (with_words (set 3 11L));
  mal "length over limit" "exceed the limit of 65536"
    (buf [ Decode.magic_patterns; 1L; 1L; i (Decode.max_pattern_words + 1); 1L; 0L ]);
  mal "length too short" "pattern 0: word 11: arity 1 impossible with 1 words left"
    (with_words (set 3 9L));
  mal "pattern ends early" "pattern 0: truncated: its words end at word 5, expected variable"
    (buf (patterns_words_raw [ [ 1L ] ] @ [ 0L ]));
  mal "trailing inside pattern" "pattern 0: 1 trailing words inside its 11 words"
    (buf (patterns_words_raw [ pattern_words p_mmt @ [ 0L ] ]));
  mal "trailing after patterns" "1 trailing words after the last pattern" (buf (pw @ [ 1L ]));
  mal "unknown pattern tag 0" "pattern 0: word 4: unknown pattern tag 0" (one [ 0L; 1L ]);
  mal "unknown pattern tag 10" "unknown pattern tag 10" (one [ 10L; 1L ]);
  for t = 5 to 9 do
    mal (Printf.sprintf "reserved tag %d" t) (Printf.sprintf "reserved pattern tag %d" t)
      (one [ i t; 1L; 1L ])
  done;
  mal "negative variable" "pattern 0: word 5: variable -1 out of range" (one [ 1L; -1L ]);
  mal "variable 2^62" "variable 4611686018427387904 out of range" (one [ 1L; 0x4000000000000000L ]);
  mal "negative symbol" "symbol -7 out of range" (one [ 2L; -7L; 0L ]);
  mal "negative arity" "arity -1 impossible" (one [ 2L; 1L; -1L ]);
  mal "arity too large" "arity 3 impossible with 4 words left" (one [ 2L; 1L; 3L; 1L; 0L; 1L; 1L ]);
  mal "unknown guard tag" "unknown guard tag 7" (one [ 4L; 1L; 0L; 7L ]);
  mal "guard tag 0" "unknown guard tag 0" (one [ 4L; 1L; 0L; 0L ]);
  mal "unknown expr tag" "unknown expression tag 6" (one [ 4L; 1L; 0L; 2L; 6L; 1L; 1L ]);
  mal "constant out of range" "constant -4611686018427387905 outside the 63-bit range"
    (one [ 4L; 1L; 0L; 2L; 1L; -0x4000000000000001L; 1L; 0L ]);
  mal "attribute id out of range" "attribute id -1 out of range"
    (one [ 4L; 1L; 0L; 2L; 2L; 0L; -1L; 1L; 0L ]);
  mal "guard truncated" "expected an expression tag" (one [ 4L; 1L; 0L; 2L; 1L; 5L ]);
  (* every proper prefix of valid pattern sets is malformed *)
  let pw2 = Array.of_list (patterns_words [ p_mmt; p_guarded; p_alt ]) in
  for k = 0 to Array.length pw2 - 1 do
    match dp (Decode.of_array (Array.sub pw2 0 k)) with
    | Ok _ -> check (Printf.sprintf "patterns prefix %d accepted" k) false
    | Error e ->
        check (Printf.sprintf "patterns prefix %d kind" k) (e.Decode.kind = Decode.Malformed)
  done

let rec nest_alt d = if d <= 1 then M.PVar 0 else M.PAlt (M.PVar 0, nest_alt (d - 1))

let rec nest_not d = if d <= 0 then M.GTrue else M.GNot (nest_not (d - 1))

let test_depth () =
  let dp ps = Decode.decode_patterns (buf (patterns_words ps)) in
  let md = Decode.max_depth in
  check "depth = max (patterns)" (Result.is_ok (dp [ nest_alt md ]));
  expect_error "depth = max + 1 (patterns)" Decode.Too_deep "nesting deeper than 10000"
    (dp [ nest_alt (md + 1) ]);
  (* pattern, guard and expression depth add up: PGuard(1) + guard chain *)
  check "depth = max (guard)" (Result.is_ok (dp [ M.PGuard (M.PVar 0, nest_not (md - 2)) ]));
  expect_error "depth = max + 1 (guard)" Decode.Too_deep "nesting deeper"
    (dp [ M.PGuard (M.PVar 0, nest_not (md - 1)) ]);
  let rec nest_add d = if d <= 1 then M.EConst 1 else M.EAdd (M.EConst 1, nest_add (d - 1)) in
  check "depth = max (expr)"
    (Result.is_ok (dp [ M.PGuard (M.PVar 0, M.GEq (M.EConst 0, nest_add (md - 2))) ]));
  expect_error "depth = max + 1 (expr)" Decode.Too_deep "nesting deeper"
    (dp [ M.PGuard (M.PVar 0, M.GEq (M.EConst 0, nest_add (md - 1))) ]);
  (* a truncated over-deep buffer: depth is checked before reading on *)
  let w = pattern_words (nest_alt (md + 5)) in
  expect_error "too deep, truncated" Decode.Too_deep "nesting deeper"
    (Decode.decode_patterns
       (buf (patterns_words_raw [ List.filteri (fun k _ -> k < List.length w - 2) w ])))

let test_ill_formed () =
  let dp ps = Decode.decode_patterns (buf (patterns_words ps)) in
  let ill what sub ps = expect_error what Decode.Ill_formed sub (dp ps) in
  ill "guard reads unbound variable"
    "pattern 1: a guard reads variable 9, which the guarded pattern does not bind"
    [ p_mmt; M.PGuard (p_mmt, M.GEq (M.EAttr (9, 0), M.EConst 1)) ];
  ill "variable bound on one alternate only" "reads variable 1"
    [ M.PGuard (M.PAlt (M.PVar 1, M.PVar 2), M.GLt (M.EAttr (1, 0), M.EConst 3)) ];
  ill "nested guard" "reads variable 5"
    [ M.PApp (1, [ M.PVar 5; M.PGuard (M.PVar 6, M.GEq (M.EAttr (5, 0), M.EAttr (6, 0))) ]) ];
  check "guard reading its own variables"
    (Result.is_ok (dp [ M.PApp (1, [ M.PVar 5; M.PGuard (M.PVar 6, M.GEq (M.EAttr (6, 0), M.EConst 0)) ]) ]))

(* ------------------------------------------------------------ engine *)

let test_engine () =
  let gh = Engine.graph_load (buf (graph_words g_nodes)) in
  let ph = Engine.patterns_load (buf (patterns_words [ p_mmt; p_guarded; p_alt ])) in
  let m index root = Engine.match_one ~graph:gh ~patterns:ph ~index ~root ~fuel:0 in
  check "mmt at 3" (m 0 3 = (0, [ (x, 0); (y, 1) ]));
  check "mmt at 4" (m 0 4 = (1, []));
  check "mmt at 0" (m 0 0 = (1, []));
  (* x.shape[1] = 8, y.shape[1] = 4 -> the guard fails *)
  check "guarded at 3" (m 1 3 = (1, []));
  check "alt at 3" (m 2 3 = (0, [ (x, 0); (y, 1) ]));
  check "alt at 4" (m 2 4 = (0, [ (x, 0); (y, 1) ]));
  check "out of fuel"
    (Engine.match_one ~graph:gh ~patterns:ph ~index:0 ~root:3 ~fuel:2 = (2, []));
  check "handle sizes" (Engine.handle_size gh = 5 && Engine.handle_size ph = 3);
  let r = Engine.match_all_words ~graph:gh ~patterns:ph ~fuel:0 in
  let words = Array.init (Bigarray.Array1.dim r) (fun k -> Int64.to_int r.{k}) in
  check "match_all layout"
    (words = [| 3; 0; 3; 0; 2; 0; 0; 1; 1; 2; 3; 0; 2; 0; 0; 1; 1; 2; 4; 0; 2; 0; 0; 1; 1 |]);
  let code f = try f (); 0 with Engine.Error (c, _) -> c in
  check "bad handle" (code (fun () -> ignore (Engine.handle_size 999)) = Engine.e_bad_handle);
  check "wrong kind"
    (code (fun () -> ignore (Engine.match_one ~graph:ph ~patterns:ph ~index:0 ~root:0 ~fuel:0))
    = Engine.e_bad_handle);
  check "root out of range" (code (fun () -> ignore (m 0 5)) = Engine.e_out_of_range);
  check "index out of range" (code (fun () -> ignore (m 3 0)) = Engine.e_out_of_range);
  check "malformed load" (code (fun () -> ignore (Engine.graph_load (buf [ 1L ]))) = Engine.e_malformed);
  Engine.release gh;
  check "released" (code (fun () -> ignore (Engine.handle_size gh)) = Engine.e_bad_handle);
  check "double release" (code (fun () -> Engine.release gh) = Engine.e_bad_handle)

let () =
  test_graph_valid ();
  test_graph_malformed ();
  test_patterns_valid ();
  test_patterns_malformed ();
  test_depth ();
  test_ill_formed ();
  test_engine ();
  Printf.printf "test_decode: %d checks, %d failures\n" !checks !failures;
  if !failures > 0 then exit 1
