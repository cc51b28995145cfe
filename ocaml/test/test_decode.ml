(* Tests of the decoder (and of the engine on decoded values), plain OCaml.
   Valid buffers decode to the expected values; each class of malformed
   buffer is rejected with the right kind and a precise message; the engine
   matches every form of the full calculus (format VERSION 2). *)

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

let graph_words ?(sym = []) (nodes : (int * int list * (int * int) list) list) : int64 list =
  [ Decode.magic_graph; 2L; i (List.length nodes) ]
  @ List.concat_map
      (fun (l, kids, attrs) ->
        [ i l; i (List.length kids) ]
        @ List.map i kids
        @ [ i (List.length attrs) ]
        @ List.concat_map (fun (a, v) -> [ i a; i v ]) attrs)
      nodes
  @ [ i (List.length sym) ]
  @ List.concat_map (fun (s, a, v) -> [ i s; i a; i v ]) sym

(* Prefix form.  The encoders push words onto a reversed accumulator, so
   that they are linear also on deep left-nested terms. *)
let rec expr_rev acc = function
  | M.EConst z -> i z :: 1L :: acc
  | M.EAttr (x, a) -> i a :: i x :: 2L :: acc
  | M.EAdd (a, b) -> expr_rev (expr_rev (3L :: acc) a) b
  | M.ESub (a, b) -> expr_rev (expr_rev (4L :: acc) a) b
  | M.EMul (a, b) -> expr_rev (expr_rev (5L :: acc) a) b
  | M.EFAttr (f, a) -> i a :: i f :: 6L :: acc

let rec guard_rev acc = function
  | M.GTrue -> 1L :: acc
  | M.GEq (a, b) -> expr_rev (expr_rev (2L :: acc) a) b
  | M.GLt (a, b) -> expr_rev (expr_rev (3L :: acc) a) b
  | M.GAnd (a, b) -> guard_rev (guard_rev (4L :: acc) a) b
  | M.GOr (a, b) -> guard_rev (guard_rev (5L :: acc) a) b
  | M.GNot a -> guard_rev (6L :: acc) a

let rev_ints acc l = List.fold_left (fun acc v -> i v :: acc) acc l

let rec pattern_rev acc = function
  | M.PVar x -> i x :: 1L :: acc
  | M.PApp (f, ps) -> List.fold_left pattern_rev (i (List.length ps) :: i f :: 2L :: acc) ps
  | M.PAlt (a, b) -> pattern_rev (pattern_rev (3L :: acc) a) b
  | M.PGuard (p, g) -> guard_rev (pattern_rev (4L :: acc) p) g
  | M.PExists (x, p) -> pattern_rev (i x :: 5L :: acc) p
  | M.PExistsF (f, p) -> pattern_rev (i f :: 6L :: acc) p
  | M.PConstr (p, p', x) -> i x :: pattern_rev (pattern_rev (7L :: acc) p) p'
  | M.PFunVar (f, ps) -> List.fold_left pattern_rev (i (List.length ps) :: i f :: 8L :: acc) ps
  | M.PCall (p, xs, fs) ->
      rev_ints (i (List.length fs) :: rev_ints (i (List.length xs) :: i p :: 9L :: acc) xs) fs

let pattern_words p = List.rev (pattern_rev [] p)

(* a definition with an already encoded body *)
let def_words_raw ~n ~m ?(pb = []) ?(pfb = []) (body : int64 list) : int64 list =
  [ i n; i m; i (List.length pb) ]
  @ List.map i pb
  @ [ i (List.length pfb) ]
  @ List.map i pfb
  @ [ i (List.length body) ]
  @ body

let def_words (d : M.pdef) =
  def_words_raw ~n:d.M.nparams ~m:d.M.nfparams ~pb:d.M.pbinds ~pfb:d.M.pfbinds
    (pattern_words d.M.body)

let set_words_raw (defs : int64 list list) (roots : int list) : int64 list =
  [ Decode.magic_patterns; 2L; i (List.length defs) ]
  @ List.concat defs
  @ [ i (List.length roots) ]
  @ List.map i roots

let set_words (defs : M.pdef list) roots = set_words_raw (List.map def_words defs) roots

(* A call-free pattern as a one-definition root: its parameters are its
   variables 0 .. max, pbinds/pfbinds what the body binds (the extracted
   [binds] on an empty table, so the claim is right). *)
let rec max_var = function
  | M.PVar x -> x
  | M.PApp (_, ps) | M.PFunVar (_, ps) -> List.fold_left (fun a p -> max a (max_var p)) (-1) ps
  | M.PAlt (a, b) | M.PConstr (a, b, _) -> max (max_var a) (max_var b)
  | M.PGuard (p, _) | M.PExists (_, p) | M.PExistsF (_, p) -> max_var p
  | M.PCall (_, xs, _) -> List.fold_left max (-1) xs

let rec max_fvar = function
  | M.PVar _ -> -1
  | M.PApp (_, ps) -> List.fold_left (fun a p -> max a (max_fvar p)) (-1) ps
  | M.PFunVar (f, ps) -> List.fold_left (fun a p -> max a (max_fvar p)) f ps
  | M.PAlt (a, b) | M.PConstr (a, b, _) -> max (max_fvar a) (max_fvar b)
  | M.PGuard (p, _) | M.PExists (_, p) | M.PExistsF (_, p) -> max_fvar p
  | M.PCall (_, _, fs) -> List.fold_left max (-1) fs

let sort_uniq l = List.sort_uniq compare l

let auto_def ?n ?m p : M.pdef =
  let n = match n with Some n -> n | None -> max_var p + 1 in
  let m = match m with Some m -> m | None -> max_fvar p + 1 in
  {
    M.nparams = n;
    nfparams = m;
    body = p;
    pbinds = List.filter (fun x -> x < n) (sort_uniq (M.binds [] p));
    pfbinds = List.filter (fun f -> f < m) (sort_uniq (M.fbinds [] p));
  }

(* each pattern its own root *)
let patterns_words ps = set_words (List.map auto_def ps) (List.mapi (fun k _ -> k) ps)

let buf l = Decode.of_array (Array.of_list l)

(* ------------------------------------------------------------ fixtures *)

(* symbols *)
let matmul = 1
let trans = 2
let neg = 3
let relu = 4
let leaf = 10

(* attribute ids *)
let op_class = 2

(* x(0), y(1), Trans(y)(2), MatMul(x, Trans y)(3), MatMul(x, y)(4) *)
let g_nodes =
  [
    (leaf, [], [ (0, 2); (1, 1); (100, 4); (101, 8) ]);
    (leaf, [], [ (0, 2); (1, 1); (101, 4); (100, 8) ]);
    (trans, [ 1 ], [ (0, 2) ]);
    (matmul, [ 0; 2 ], []);
    (matmul, [ 0; 1 ], [ (1, 1) ]);
  ]

(* operator classes: Neg and ReLU are class 7 (unary elementwise), Trans 9 *)
let g_sym = [ (relu, op_class, 7); (neg, op_class, 7); (trans, op_class, 9); (neg, 0, -1) ]

let x = 0
let y = 1

(* MatMul(x, Trans(y)) *)
let p_mmt = M.PApp (matmul, [ M.PVar x; M.PApp (trans, [ M.PVar y ]) ])

(* ... ; guard(x.shape[1] = y.shape[1]) *)
let p_guarded = M.PGuard (p_mmt, M.GEq (M.EAttr (x, 101), M.EAttr (y, 101)))

(* MatMul(x, Trans(y) | y) *)
let p_alt = M.PApp (matmul, [ M.PVar x; M.PAlt (M.PApp (trans, [ M.PVar y ]), M.PVar y) ])

(* UnaryChain(x; F) = F(UnaryChain(x; F)) ‖ F(x)  (definition 0) *)
let unary_chain =
  {
    M.nparams = 1;
    nfparams = 1;
    body = M.PAlt (M.PFunVar (0, [ M.PCall (0, [ 0 ], [ 0 ]) ]), M.PFunVar (0, [ M.PVar 0 ]));
    pbinds = [ 0 ];
    pfbinds = [ 0 ];
  }

(* P(x) = P(x) (definition 0): never terminates; its root-operator index is
   empty (derivations are finite), so it never matches *)
let loop_def = { M.nparams = 1; nfparams = 0; body = M.PCall (0, [ 0 ], []); pbinds = []; pfbinds = [] }

(* P(x) = x ; (P(x) ≈ x) (definition 0): never terminates, its root may be
   anything (a variable), and the machine's state does not grow: out of fuel *)
let constr_loop_def =
  {
    M.nparams = 1;
    nfparams = 0;
    body = M.PConstr (M.PVar 0, M.PCall (0, [ 0 ], []), 0);
    pbinds = [ 0 ];
    pfbinds = [];
  }

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
  match Decode.decode_graph (buf (graph_words ~sym:g_sym g_nodes)) with
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
      check "sym attr" (Repr.sym_attr g op_class neg = Some 7 && Repr.sym_attr g op_class relu = Some 7);
      check "sym attr (other id)" (Repr.sym_attr g 0 neg = Some (-1) && Repr.sym_attr g 0 relu = None);
      check "sym attr trans" (Repr.sym_attr g op_class trans = Some 9);
      check "sym attr absent symbol" (Repr.sym_attr g op_class matmul = None);
      check "sym attr absent id" (Repr.sym_attr g 5 neg = None);
      let mg = Repr.to_matcher g in
      check "matcher view" (mg.M.sym_attr op_class neg = Some 7 && mg.M.attr 101 0 = Some 8);
      (* many attributes (sorted with Array.sort) *)
      let attrs = List.init 40 (fun k -> ((k * 7919) mod 1000, k)) in
      let sym = List.init 300 (fun k -> ((k * 31) mod 17, (k * 7919) mod 1009, k)) in
      (match Decode.decode_graph (buf (graph_words ~sym [ (5, [], attrs) ])) with
      | Ok g2 ->
          check "40 attributes"
            (List.for_all (fun (a, v) -> Repr.attr g2 a 0 = Some v) attrs
            && Repr.attr g2 1001 0 = None);
          check "300 symbol attributes"
            (List.for_all (fun (s, a, v) -> Repr.sym_attr g2 a s = Some v) sym
            && Repr.sym_attr g2 1010 0 = None
            && Repr.sym_attr g2 0 17 = None)
      | Error e -> check ("40 attributes: " ^ e.Decode.message) false);
      (* empty graph, cycles, self loops are legal *)
      check "empty graph" (Result.is_ok (Decode.decode_graph (buf (graph_words []))));
      check "symbol attributes without nodes"
        (Result.is_ok (Decode.decode_graph (buf (graph_words ~sym:[ (1, 2, 3) ] []))));
      check "cycle"
        (Result.is_ok (Decode.decode_graph (buf (graph_words [ (1, [ 1 ], []); (1, [ 0; 0 ], []) ]))));
      check "extreme values"
        (Result.is_ok
           (Decode.decode_graph
              (buf
                 ([ Decode.magic_graph; 2L; 1L; 0x3FFFFFFFFFFFFFFFL; 0L; 2L ]
                 @ [ 0x3FFFFFFFFFFFFFFFL; 0x3FFFFFFFFFFFFFFFL; 0L; Int64.neg 0x3FFFFFFFFFFFFFFFL ]
                 @ [ 1L; 0x3FFFFFFFFFFFFFFFL; 0x3FFFFFFFFFFFFFFFL; Int64.neg 0x3FFFFFFFFFFFFFFFL ]))))

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
  mal "short header" "header needs 3" (buf [ Decode.magic_graph; 2L ]);
  mal "bad magic" "bad magic" (with_words (set 0 0x1234L));
  mal "pattern magic in graph" "bad magic" (with_words (set 0 Decode.magic_patterns));
  mal "version 1" "unsupported format version 1 (this library reads version 2)" (with_words (set 1 1L));
  mal "version 3" "unsupported format version 3" (with_words (set 1 3L));
  mal "negative n" "negative node count -1" (with_words (set 2 (-1L)));
  mal "n too large" "truncated: 1000 nodes announced" (with_words (set 2 1000L));
  mal "huge n" "nodes announced" (with_words (set 2 Int64.max_int));
  mal "no symbol-attribute count" "expected the number of symbol attributes"
    (buf [ Decode.magic_graph; 2L; 0L ]);
  mal "node without symbol-attribute count" "truncated: 1 nodes announced"
    (buf [ Decode.magic_graph; 2L; 1L; 5L; 0L; 0L ]);
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
    (buf [ Decode.magic_graph; 2L; 1L; 5L; 0L; -1L; 0L ]);
  mal "n_attrs beyond buffer" "truncated: 2 attributes announced"
    (buf [ Decode.magic_graph; 2L; 1L; 5L; 0L; 2L; 0L; 1L; 1L ]);
  mal "attr id out of range" "graph: node 0: attribute id -4 out of range"
    (buf [ Decode.magic_graph; 2L; 1L; 5L; 0L; 1L; -4L; 1L; 0L ]);
  mal "attr value out of range" "value 4611686018427387904 outside the range (-2^62, 2^62)"
    (buf [ Decode.magic_graph; 2L; 1L; 5L; 0L; 1L; 4L; 0x4000000000000000L; 0L ]);
  mal "attr value -2^62 (OCaml's min_int)" "value -4611686018427387904 outside the range"
    (buf [ Decode.magic_graph; 2L; 1L; 5L; 0L; 1L; 4L; -0x4000000000000000L; 0L ]);
  mal "attr value min_int64" "outside the range (-2^62, 2^62)"
    (buf [ Decode.magic_graph; 2L; 1L; 5L; 0L; 1L; 4L; Int64.min_int; 0L ]);
  mal "duplicate attr" "graph: node 1: duplicate attribute id 100"
    (buf (graph_words [ (leaf, [], []); (leaf, [], [ (100, 1); (0, 2); (100, 3) ]) ]));
  mal "duplicate attr (large node)" "graph: node 0: duplicate attribute id 7"
    (buf (graph_words [ (leaf, [], List.init 30 (fun k -> (k, k)) @ [ (7, 0) ]) ]));
  (* symbol attributes *)
  let gs sym = buf (graph_words ~sym [ (leaf, [], []) ]) in
  let ends_with_sym l = buf ([ Decode.magic_graph; 2L; 1L; 5L; 0L; 0L ] @ l) in
  mal "negative sym count" "graph: negative number of symbol attributes -1" (ends_with_sym [ -1L ]);
  mal "sym count beyond buffer" "graph: truncated: 2 symbol attributes announced at word 6"
    (ends_with_sym [ 2L; 1L; 2L; 3L; 1L; 2L ]);
  mal "sym count huge" "symbol attributes announced" (ends_with_sym [ Int64.max_int ]);
  mal "sym symbol out of range" "graph: symbol attribute 1: symbol -2 out of range"
    (ends_with_sym [ 2L; 1L; 2L; 3L; -2L; 2L; 3L ]);
  mal "sym symbol 2^62" "symbol 4611686018427387904 out of range"
    (ends_with_sym [ 1L; 0x4000000000000000L; 2L; 3L ]);
  mal "sym attr id out of range" "graph: symbol attribute 0: attribute id -1 out of range"
    (ends_with_sym [ 1L; 1L; -1L; 3L ]);
  mal "sym value out of range" "graph: symbol attribute 0: value -4611686018427387905 outside"
    (ends_with_sym [ 1L; 1L; 2L; -0x4000000000000001L ]);
  mal "duplicate sym attr" "graph: duplicate symbol attribute (symbol 3, attribute id 2)"
    (gs [ (3, 2, 1); (4, 2, 1); (3, 1, 0); (3, 2, 5) ]);
  check "same attr id on two symbols" (Result.is_ok (dg (gs [ (3, 2, 1); (4, 2, 1) ])));
  mal "trailing word" "graph: 1 trailing words after the symbol attributes" (buf (g @ [ 0L ]));
  mal "trailing words (n too small)" "trailing words" (with_words (set 2 4L));
  mal "trailing after sym attrs" "graph: 2 trailing words after the symbol attributes"
    (ends_with_sym [ 1L; 1L; 2L; 3L; 0L; 0L ]);
  (* arity limit (arrays: these buffers are too long for non-tail-recursive list code) *)
  let star n =
    Array.concat [ [| Decode.magic_graph; 2L; 1L; 5L; i n |]; Array.make n 0L; [| 0L; 0L |] ]
  in
  let big = Decode.max_arity + 1 in
  mal "arity limit" (Printf.sprintf "%d children exceed the limit of %d" big Decode.max_arity)
    (Decode.of_array (star big));
  check "arity at the limit" (Result.is_ok (dg (Decode.of_array (star Decode.max_arity))));
  (* every proper prefix of a valid buffer is malformed *)
  let a = Array.of_list (graph_words ~sym:g_sym g_nodes) in
  check "full buffer accepted" (Result.is_ok (dg (Decode.of_array a)));
  for k = 0 to Array.length a - 1 do
    match dg (Decode.of_array (Array.sub a 0 k)) with
    | Ok _ -> check (Printf.sprintf "graph prefix %d accepted" k) false
    | Error e -> check (Printf.sprintf "graph prefix %d kind" k) (e.Decode.kind = Decode.Malformed)
  done

(* --------------------------------------------------------- pattern tests *)

(* every form of the calculus *)
let full_defs =
  [
    (* 0: UnaryChain(x; F) *)
    unary_chain;
    (* 1: MatMul(x, ∃y. Trans(y)) ; (Trans(z) ≈ x), parameters x = 0, z = 1,
       local y = 5 *)
    {
      M.nparams = 2;
      nfparams = 0;
      body =
        M.PConstr
          ( M.PApp (matmul, [ M.PVar 0; M.PExists (5, M.PApp (trans, [ M.PVar 5 ])) ]),
            M.PApp (trans, [ M.PVar 1 ]),
            0 );
      pbinds = [ 0; 1 ];
      pfbinds = [];
    };
    (* 2: ∃F. F(x) ; guard(F.op_class = 7 ∧ x.rank - 1 < 2 * 3) *)
    {
      M.nparams = 1;
      nfparams = 0;
      body =
        M.PExistsF
          ( 4,
            M.PGuard
              ( M.PFunVar (4, [ M.PVar 0 ]),
                M.GAnd
                  ( M.GEq (M.EFAttr (4, op_class), M.EConst 7),
                    M.GLt (M.ESub (M.EAttr (0, 0), M.EConst 1), M.EMul (M.EConst 2, M.EConst 3)) ) ) );
      pbinds = [ 0 ];
      pfbinds = [];
    };
    (* 3: calls of 0 and 2, no arguments of some kinds *)
    {
      M.nparams = 2;
      nfparams = 1;
      body = M.PAlt (M.PCall (0, [ 1 ], [ 0 ]), M.PApp (neg, [ M.PCall (2, [ 1 ], []) ]));
      pbinds = [ 1 ];
      pfbinds = [];
    };
    (* 4: the loop *)
    loop_def;
    (* 5: call with arities that do not match the callee (allowed, fails) *)
    { M.nparams = 0; nfparams = 3; body = M.PCall (0, [], [ 0; 1; 2 ]); pbinds = []; pfbinds = [] };
  ]

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
      M.PGuard (M.PVar 0, M.GLt (M.EConst (-4611686018427387903), M.EConst 4611686018427387903));
    ]
  in
  (match Decode.decode_patterns (buf (patterns_words ps)) with
  | Error e -> check ("valid patterns: " ^ e.Decode.message) false
  | Ok s ->
      check "patterns round-trip" (List.map (fun d -> d.M.body) s.Repr.defs = ps);
      check "roots" (s.Repr.roots = Array.init (List.length ps) Fun.id);
      check "def array" (Array.to_list s.Repr.def_array = s.Repr.defs));
  let roots = [ 3; 0; 0; 5; 1; 2; 4 ] in
  (match Decode.decode_patterns (buf (set_words full_defs roots)) with
  | Error e -> check ("full calculus: " ^ e.Decode.message) false
  | Ok s ->
      check "full calculus round-trip" (s.Repr.defs = full_defs);
      check "full calculus roots" (Array.to_list s.Repr.roots = roots));
  (* no definitions, no roots; definitions without roots *)
  check "empty set" (Result.is_ok (Decode.decode_patterns (buf (set_words [] []))));
  check "no roots" (Result.is_ok (Decode.decode_patterns (buf (set_words full_defs []))));
  (* weaker (even empty) pbinds claims are fine: only wrong claims are not *)
  check "weaker claim"
    (Result.is_ok
       (Decode.decode_patterns (buf (set_words [ { unary_chain with M.pbinds = []; pfbinds = [] } ] [ 0 ]))));
  check "duplicate claim"
    (Result.is_ok
       (Decode.decode_patterns (buf (set_words [ { unary_chain with M.pbinds = [ 0; 0 ] } ] [ 0 ]))));
  (* a claim through a call: Q(a, b) = UnaryChain(b; F) binds b only *)
  let q pb = { M.nparams = 2; nfparams = 1; body = M.PCall (0, [ 1 ], [ 0 ]); pbinds = pb; pfbinds = [ 0 ] } in
  check "claim through a call"
    (Result.is_ok (Decode.decode_patterns (buf (set_words [ unary_chain; q [ 1 ] ] [ 1 ]))));
  expect_error "wrong claim through a call" Decode.Ill_formed
    "definition 1: pbinds claims parameter 0, which the body does not bind"
    (Decode.decode_patterns (buf (set_words [ unary_chain; q [ 0; 1 ] ] [ 1 ])));
  (* limits: parameters *)
  let wide_params = { M.nparams = Decode.max_params; nfparams = Decode.max_params; body = M.PVar 0; pbinds = [ 0 ]; pfbinds = [] } in
  check "2^16 parameters" (Result.is_ok (Decode.decode_patterns (buf (set_words [ wide_params ] [ 0 ]))))

let test_patterns_malformed () =
  let dp = Decode.decode_patterns in
  let mal what sub b = expect_error what Decode.Malformed sub (dp b) in
  (* words: 0-2 header | 3 n_params = 2, 4 n_fparams = 0, 5 n_pbinds = 2,
     6-7 pbinds, 8 n_pfbinds = 0, 9 n_words = 10, 10-19 body | 20 n_roots = 1,
     21 root *)
  let pw = patterns_words [ p_mmt ] in
  check "fixture accepted" (Result.is_ok (dp (buf pw)));
  let with_words f = buf (f (Array.of_list pw) |> Array.to_list) in
  let set k v a =
    a.(k) <- v;
    a
  in
  (* one definition with the given body words, parameters 0..3 / 0..1, one root *)
  let one ws = buf (set_words_raw [ def_words_raw ~n:4 ~m:2 ws ] [ 0 ]) in
  let with_def ?(n = 1) ?(m = 1) ?(pb = []) ?(pfb = []) ws =
    buf (set_words_raw [ def_words_raw ~n ~m ~pb ~pfb ws ] [ 0 ])
  in
  mal "empty" "buffer has 0 words" (buf []);
  mal "bad magic" "bad magic" (with_words (set 0 Decode.magic_graph));
  mal "version 1" "unsupported format version 1" (with_words (set 1 1L));
  mal "bad version" "unsupported format version 0" (with_words (set 1 0L));
  mal "negative count" "negative definition count -2" (with_words (set 2 (-2L)));
  mal "count too large" "truncated: 9 definitions announced" (with_words (set 2 9L));
  mal "count over the limit" "definitions exceed the limit of 65536"
    (with_words (set 2 (i (Decode.max_defs + 1))));
  mal "no roots word" "expected the number of roots" (buf [ Decode.magic_patterns; 2L; 0L ]);
  (* with definitions, the last body may not reach the end of the buffer *)
  mal "no roots word after a definition" "truncated: body of 10 words announced at word 9, only 9 left"
    (buf (List.filteri (fun k _ -> k < List.length pw - 2) pw));
  (* definition header: n_params at word 3 *)
  mal "negative n_params" "definition 0: word 3: negative number of parameters -1"
    (with_words (set 3 (-1L)));
  mal "n_params over the limit" "word 3: number of parameters 65537 exceeds the limit of 65536"
    (with_words (set 3 (i (Decode.max_params + 1))));
  mal "negative n_fparams" "word 4: negative number of operator parameters -5"
    (with_words (set 4 (-5L)));
  mal "n_fparams over the limit" "number of operator parameters 4611686018427387904 exceeds"
    (with_words (set 4 0x4000000000000000L));
  mal "negative n_pbinds" "word 5: negative number of pbinds entries -1" (with_words (set 5 (-1L)));
  mal "n_pbinds beyond buffer" "word 5: number of pbinds entries 20 impossible"
    (with_words (set 5 20L));
  mal "n_pbinds over the limit" "number of pbinds entries 65537 exceeds the limit"
    (with_words (set 5 (i (Decode.max_params + 1))));
  mal "pbinds entry not a parameter" "definition 0: word 6: pbinds entry 2 is not a parameter (the definition has 2)"
    (with_def ~n:2 ~pb:[ 2 ] [ 1L; 0L ]);
  mal "negative pbinds entry" "pbinds entry -1 is not a parameter"
    (with_def ~n:2 ~pb:[ 0; -1 ] [ 1L; 0L ]);
  mal "pfbinds entry not a parameter" "word 7: pfbinds entry 1 is not a parameter (the definition has 1)"
    (with_def ~pfb:[ 1 ] [ 1L; 0L ]);
  mal "pfbinds entry without operator parameters" "pfbinds entry 0 is not a parameter (the definition has 0)"
    (with_def ~m:0 ~pfb:[ 0 ] [ 1L; 0L ]);
  mal "negative n_pfbinds" "word 8: negative number of pfbinds entries -3" (with_words (set 8 (-3L)));
  mal "negative body length" "definition 0: word 9: negative body length -1" (with_words (set 9 (-1L)));
  mal "body length beyond buffer" "definition 0: truncated: body of 12 words announced at word 9, only 11 left"
    (with_words (set 9 12L));
  mal "body length over limit" "body of 65537 words exceeds the limit of 65536"
    (buf [ Decode.magic_patterns; 2L; 1L; 0L; 0L; 0L; 0L; i (Decode.max_pattern_words + 1); 1L; 0L; 1L; 0L ]);
  mal "body too short" "definition 0: word 17: arity 1 impossible with 1 words left"
    (with_words (set 9 9L));
  mal "body ends early" "definition 0: truncated: its words end at word 9, expected variable"
    (buf (set_words_raw [ def_words_raw ~n:1 ~m:0 [ 1L ] ] [] @ [ 0L ]));
  mal "trailing inside body" "definition 0: 1 trailing words inside its body of 11 words"
    (buf (set_words_raw [ def_words_raw ~n:2 ~m:0 (pattern_words p_mmt @ [ 0L ]) ] [ 0 ]));
  mal "trailing after roots" "patterns: 1 trailing words after the roots" (buf (pw @ [ 1L ]));
  (* roots *)
  let rw roots = buf (set_words [ auto_def p_mmt; auto_def p_alt ] roots) in
  check "roots in range" (Result.is_ok (dp (rw [ 1; 0; 1 ])));
  mal "root out of range" "patterns: root 2 (word" (rw [ 1; 0; 2 ]);
  mal "root = n_defs" "definition index 2 out of range [0, 2)" (rw [ 2 ]);
  mal "negative root" "root 0 (word" (rw [ -1 ]);
  mal "root without definitions" "definition index 0 out of range [0, 0)"
    (buf (set_words [] [ 0 ]));
  mal "negative root count" "negative root count -1"
    (buf (set_words [ auto_def p_mmt ] [] |> List.rev |> List.tl |> List.rev |> fun l -> l @ [ -1L ]));
  mal "root count beyond buffer" "truncated: 3 roots announced"
    (buf (set_words [ auto_def p_mmt ] [] |> List.rev |> List.tl |> List.rev |> fun l -> l @ [ 3L; 0L ]));
  (* tags *)
  mal "unknown pattern tag 0" "definition 0: word 8: unknown pattern tag 0" (one [ 0L; 1L ]);
  mal "unknown pattern tag 10" "unknown pattern tag 10" (one [ 10L; 1L ]);
  mal "negative variable" "definition 0: word 9: variable -1 out of range" (one [ 1L; -1L ]);
  mal "variable 2^62" "variable 4611686018427387904 out of range" (one [ 1L; 0x4000000000000000L ]);
  (* (bound by an exists: a variable must be in scope) *)
  check "variable 2^62 - 1"
    (Result.is_ok (dp (with_def ~n:0 ~m:0 [ 5L; 0x3FFFFFFFFFFFFFFFL; 1L; 0x3FFFFFFFFFFFFFFFL ])));
  mal "negative symbol" "symbol -7 out of range" (one [ 2L; -7L; 0L ]);
  mal "negative arity" "negative arity -1" (one [ 2L; 1L; -1L ]);
  mal "arity too large" "arity 3 impossible with 4 words left" (one [ 2L; 1L; 3L; 1L; 0L; 1L; 1L ]);
  mal "unknown guard tag" "unknown guard tag 7" (one [ 4L; 1L; 0L; 7L ]);
  mal "guard tag 0" "unknown guard tag 0" (one [ 4L; 1L; 0L; 0L ]);
  mal "unknown expr tag" "unknown expression tag 7" (one [ 4L; 1L; 0L; 2L; 7L; 1L; 1L ]);
  mal "constant out of range" "constant -4611686018427387905 outside the range (-2^62, 2^62)"
    (one [ 4L; 1L; 0L; 2L; 1L; -0x4000000000000001L; 1L; 0L ]);
  (* -2^62 is OCaml's min_int: abs min_int < 0 would pass the guard's bound test *)
  mal "constant -2^62 (min_int)" "constant -4611686018427387904 outside the range (-2^62, 2^62)"
    (one [ 4L; 1L; 0L; 2L; 1L; -0x4000000000000000L; 1L; 0L ]);
  mal "attribute id out of range" "attribute id -1 out of range"
    (one [ 4L; 1L; 0L; 2L; 2L; 0L; -1L; 1L; 0L ]);
  mal "guard truncated" "expected an expression tag" (one [ 4L; 1L; 0L; 2L; 1L; 5L ]);
  (* new forms *)
  mal "F.a: operator variable out of range" "operator variable -1 out of range"
    (one [ 4L; 8L; 0L; 1L; 1L; 0L; 2L; 6L; -1L; 2L; 1L; 0L ]);
  mal "F.a: attribute id out of range" "attribute id 4611686018427387904 out of range"
    (one [ 4L; 8L; 0L; 1L; 1L; 0L; 2L; 6L; 0L; 0x4000000000000000L; 1L; 0L ]);
  mal "F.a truncated" "expected attribute id" (one [ 4L; 8L; 0L; 1L; 1L; 0L; 2L; 6L; 0L ]);
  mal "exists: variable out of range" "word 9: variable -3 out of range" (one [ 5L; -3L; 1L; 0L ]);
  mal "exists truncated" "expected a pattern tag" (one [ 5L; 4L ]);
  mal "existsF: operator variable out of range" "operator variable -1 out of range"
    (one [ 6L; -1L; 8L; 0L; 0L ]);
  mal "constraint: variable out of range" "word 13: variable -1 out of range"
    (one [ 7L; 1L; 0L; 1L; 1L; -1L ]);
  mal "constraint without its variable" "expected variable" (one [ 7L; 1L; 0L; 1L; 1L ]);
  mal "funvar: operator variable out of range" "operator variable 4611686018427387904 out of range"
    (one [ 8L; 0x4000000000000000L; 0L ]);
  mal "funvar: negative arity" "negative arity -2" (one [ 8L; 0L; -2L ]);
  mal "funvar: arity too large" "arity 2 impossible with 2 words left" (one [ 8L; 0L; 2L; 1L; 0L ]);
  mal "call target = n_defs" "definition 0: word 9: call target 1 out of range [0, 1) (no such definition)"
    (one [ 9L; 1L; 0L; 0L ]);
  mal "call target huge" "call target 4611686018427387903 out of range [0, 1)"
    (one [ 9L; 0x3FFFFFFFFFFFFFFFL; 0L; 0L ]);
  mal "negative call target" "call target -1 out of range [0, 2^62)" (one [ 9L; -1L; 0L; 0L ]);
  mal "call: negative argument count" "negative number of call arguments -1" (one [ 9L; 0L; -1L; 0L ]);
  mal "call: argument count beyond the body" "number of call arguments 3 impossible with 3 words left"
    (one [ 9L; 0L; 3L; 0L; 1L; 0L ]);
  mal "call: argument count leaves no room for m" "number of call arguments 2 impossible"
    (one [ 9L; 0L; 2L; 0L; 1L ]);
  mal "call: argument out of range" "call argument -1 out of range" (one [ 9L; 0L; 2L; 0L; -1L; 0L ]);
  mal "call: operator argument count beyond the body" "number of operator call arguments 2 impossible"
    (one [ 9L; 0L; 0L; 2L; 0L ]);
  mal "call: negative operator argument count" "negative number of operator call arguments -1"
    (one [ 9L; 0L; 0L; -1L ]);
  mal "call: operator argument out of range" "operator call argument 4611686018427387904 out of range"
    (one [ 9L; 0L; 0L; 1L; 0x4000000000000000L ]);
  mal "call: missing m" "expected number of operator call arguments" (one [ 9L; 0L; 0L ]);
  check "call with big arities"
    (Result.is_ok (dp (one ([ 9L; 0L; 1000L ] @ List.init 1000 (fun _ -> 3L) @ [ 500L ] @ List.init 500 (fun _ -> 1L)))));
  (* a call target is checked against the whole table, also forward *)
  check "forward call"
    (Result.is_ok
       (dp (buf (set_words_raw [ def_words_raw ~n:0 ~m:0 [ 9L; 1L; 0L; 0L ]; def_words_raw ~n:1 ~m:0 [ 1L; 0L ] ] [ 0 ]))));
  mal "call target in the second definition" "definition 1: word"
    (buf (set_words_raw [ def_words_raw ~n:0 ~m:0 [ 1L; 0L ]; def_words_raw ~n:0 ~m:0 [ 9L; 2L; 0L; 0L ] ] [ 0 ]));
  (* every proper prefix of valid pattern sets is malformed *)
  let pw2 = Array.of_list (set_words full_defs [ 0; 3; 2 ]) in
  check "full set accepted" (Result.is_ok (dp (Decode.of_array pw2)));
  for k = 0 to Array.length pw2 - 1 do
    match dp (Decode.of_array (Array.sub pw2 0 k)) with
    | Ok _ -> check (Printf.sprintf "patterns prefix %d accepted" k) false
    | Error e ->
        check (Printf.sprintf "patterns prefix %d kind %s" k e.Decode.message) (e.Decode.kind = Decode.Malformed)
  done

let rec nest_alt d = if d <= 1 then M.PVar 0 else M.PAlt (M.PVar 0, nest_alt (d - 1))

let rec nest_not d = if d <= 0 then M.GTrue else M.GNot (nest_not (d - 1))

(* 2(2(...)) with an F(...), an ∃, an ∃F and a match constraint every 500 levels (more
   would make the well-formedness check itself too costly, see
   Wf_cost) *)
let rec nest_new d =
  if d <= 1 then M.PVar 0
  else
    match d mod 500 with
    | 0 -> M.PExists (1, M.PApp (1, [ M.PVar 1; nest_new (d - 2) ]))
    | 1 -> M.PExistsF (1, M.PFunVar (1, [ nest_new (d - 2) ]))
    | 2 -> M.PConstr (nest_new (d - 1), M.PVar 0, 0)
    | 3 -> M.PFunVar (0, [ nest_new (d - 1) ])
    | _ -> M.PApp (2, [ nest_new (d - 1) ])

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
  (* the new forms count like the others *)
  let rec depth = function
    | M.PVar _ | M.PCall _ -> 1
    | M.PApp (_, ps) | M.PFunVar (_, ps) -> 1 + List.fold_left (fun a p -> max a (depth p)) 0 ps
    | M.PAlt (a, b) | M.PConstr (a, b, _) -> 1 + max (depth a) (depth b)
    | M.PGuard (p, _) | M.PExists (_, p) | M.PExistsF (_, p) -> 1 + depth p
  in
  let deep = nest_new md and deeper = nest_new (md + 4) in
  check "new forms: depth computed" (depth deep <= md && depth deeper > md);
  (match dp [ deep ] with
  | Ok _ -> check "new forms at max depth" true
  | Error e -> check ("new forms at max depth: " ^ e.Decode.message) false);
  expect_error "new forms too deep" Decode.Too_deep "nesting deeper" (dp [ deeper ]);
  let constr_chain k = List.fold_left (fun p _ -> M.PConstr (p, M.PVar 1, 0)) (M.PVar 0) (List.init k Fun.id) in
  expect_error "constraint chain too deep" Decode.Too_deep "nesting deeper" (dp [ constr_chain md ]);
  check "constraint chain of 500" (Result.is_ok (dp [ constr_chain 500 ]));
  (* depth 9999 is fine for the decoder, but the cubic well-formedness
     check of such a chain is refused up front *)
  expect_error "constraint chain of 9999: cost" Decode.Malformed
    "checking well-formedness would take about" (dp [ constr_chain (md - 1) ]);
  (* F.a at the bottom of a deep expression *)
  let rec nest_fadd d = if d <= 1 then M.EFAttr (0, 2) else M.ESub (M.EConst 1, nest_fadd (d - 1)) in
  let fp d = M.PGuard (M.PFunVar (0, []), M.GLt (M.EConst 0, nest_fadd d)) in
  check "F.a at max depth" (Result.is_ok (dp [ fp (md - 2) ]));
  expect_error "F.a too deep" Decode.Too_deep "nesting deeper" (dp [ fp (md - 1) ]);
  (* a truncated over-deep buffer: depth is checked before reading on *)
  let w = pattern_words (nest_alt (md + 5)) in
  expect_error "too deep, truncated" Decode.Too_deep "nesting deeper"
    (Decode.decode_patterns
       (buf (set_words_raw [ def_words_raw ~n:1 ~m:0 (List.filteri (fun k _ -> k < List.length w - 2) w) ] [ 0 ])))

(* claims parameter 1, which the body never binds *)
let bad_claim = { M.nparams = 2; nfparams = 0; body = M.PVar 0; pbinds = [ 0; 1 ]; pfbinds = [] }

let test_wf_cost () =
  let dp defs = Decode.decode_patterns (buf (set_words defs [])) in
  let app m = M.PApp (1, List.init m (fun k -> M.PVar k)) in
  let plain n p = { M.nparams = n; nfparams = 0; body = p; pbinds = []; pfbinds = [] } in
  let alt m = plain m (M.PAlt (app m, app m)) in
  check "alt of two 5000-ary applications" (Result.is_ok (dp [ alt 5000 ]));
  expect_error "alt of two 15000-ary applications" Decode.Malformed "exceeds the limit of 1e+08"
    (dp [ alt 15000 ]);
  (* the limit is for the whole set *)
  expect_error "five 5000-ary alternates" Decode.Malformed "exceeds the limit" (dp (List.init 5 (fun _ -> alt 5000)));
  let guard_chain k m =
    plain m
      (List.fold_left (fun p _ -> M.PGuard (p, M.GEq (M.EAttr (0, 0), M.EConst 0))) (app m) (List.init k Fun.id))
  in
  check "guard chain 1000 over 1000" (Result.is_ok (dp [ guard_chain 1000 1000 ]));
  expect_error "guard chain 3000 over 20000" Decode.Malformed "exceeds the limit" (dp [ guard_chain 3000 20000 ]);
  (* calls: args_of over big pbinds *)
  let m = 15000 in
  let callee = { M.nparams = m; nfparams = 0; body = app m; pbinds = List.init m Fun.id; pfbinds = [] } in
  expect_error "call with 15000 claimed parameters" Decode.Malformed "exceeds the limit"
    (dp [ callee; { callee with M.body = M.PCall (0, List.init m Fun.id, []) } ]);
  (* the estimate bounds the actual time of Matcher.wf_defs *)
  let defs = [ alt 5000; guard_chain 1000 1000 ] in
  let t0 = Sys.time () in
  check "wf" (M.wf_defs defs);
  let dt = Sys.time () -. t0 in
  let est = Wf_cost.bound (Array.of_list defs) in
  Printf.printf "  wf_defs: %.3g counted steps in %.3f s (%.1f ns/step)\n" est dt (1e9 *. dt /. est)

let test_ill_formed () =
  let dp ps = Decode.decode_patterns (buf (patterns_words ps)) in
  let ill what sub ps = expect_error what Decode.Ill_formed sub (dp ps) in
  let ill_set what sub defs roots =
    expect_error what Decode.Ill_formed sub (Decode.decode_patterns (buf (set_words defs roots)))
  in
  ill "guard reads unbound variable"
    "definition 1: a guard reads variable 9, which the guarded pattern does not bind"
    [ p_mmt; M.PGuard (p_mmt, M.GEq (M.EAttr (9, 0), M.EConst 1)) ];
  ill "variable bound on one alternate only" "reads variable 1"
    [ M.PGuard (M.PAlt (M.PVar 1, M.PVar 2), M.GLt (M.EAttr (1, 0), M.EConst 3)) ];
  ill "nested guard" "reads variable 5"
    [ M.PApp (1, [ M.PVar 5; M.PGuard (M.PVar 6, M.GEq (M.EAttr (5, 0), M.EAttr (6, 0))) ]) ];
  check "guard reading its own variables"
    (Result.is_ok (dp [ M.PApp (1, [ M.PVar 5; M.PGuard (M.PVar 6, M.GEq (M.EAttr (6, 0), M.EConst 0)) ]) ]));
  ill "guard reads unbound operator variable"
    "definition 0: a guard reads operator variable 3, which the guarded pattern does not bind"
    [ M.PGuard (M.PFunVar (0, [ M.PVar 0 ]), M.GEq (M.EFAttr (3, 2), M.EConst 1)) ];
  ill "operator variable bound on one alternate only" "reads operator variable 0"
    [ M.PGuard (M.PAlt (M.PFunVar (0, []), M.PApp (1, [])), M.GEq (M.EFAttr (0, 2), M.EConst 1)) ];
  check "guard reading a bound operator variable"
    (Result.is_ok (dp [ M.PGuard (M.PFunVar (0, [ M.PVar 0 ]), M.GEq (M.EFAttr (0, 2), M.EAttr (0, 2))) ]));
  ill "exists whose body does not bind its variable"
    "definition 0: exists 1: its body does not bind variable 1 on every match"
    [ M.PExists (1, M.PAlt (M.PVar 1, M.PVar 0)) ];
  ill "existsF whose body does not bind its variable"
    "exists operator 2: its body does not bind operator variable 2"
    [ M.PExistsF (2, M.PApp (1, [ M.PVar 0 ])) ];
  ill "guard outside the exists reads the local"
    "a guard reads variable 1"
    [ M.PGuard (M.PApp (1, [ M.PExists (1, M.PVar 1); M.PVar 0 ]), M.GEq (M.EAttr (1, 0), M.EConst 0)) ];
  ill "constraint on an unbound variable"
    "a match constraint on variable 3, which the constrained pattern does not bind"
    [ M.PConstr (M.PVar 0, M.PVar 1, 3) ];
  ill "constraint variable bound by p' only" "match constraint on variable 1"
    [ M.PConstr (M.PVar 0, M.PVar 1, 1) ];
  check "constraint on a bound variable" (Result.is_ok (dp [ M.PConstr (M.PApp (1, [ M.PVar 0; M.PVar 1 ]), M.PVar 2, 1) ]));
  ill "problem inside p'" "reads variable 7"
    [ M.PConstr (M.PVar 0, M.PGuard (M.PVar 1, M.GEq (M.EAttr (7, 0), M.EConst 0)), 0) ];
  (* scope: every variable read is a parameter or bound by an enclosing exists *)
  let def n m body = { M.nparams = n; nfparams = m; body; pbinds = []; pfbinds = [] } in
  ill_set "variable beyond the parameters"
    "definition 0: variable 5 is out of scope (the definition has 1 parameters"
    [ def 1 0 (M.PVar 5) ] [ 0 ];
  ill_set "call argument out of scope" "definition 1: variable 7 is out of scope"
    [ def 1 0 (M.PVar 0); def 1 0 (M.PApp (2, [ M.PVar 0; M.PCall (0, [ 7 ], []) ])) ] [ 1 ];
  ill_set "operator variable out of scope"
    "definition 0: operator variable 4 is out of scope (the definition has 1 operator parameters"
    [ def 1 1 (M.PFunVar (4, [ M.PVar 0 ])) ] [ 0 ];
  ill_set "constraint variable out of scope" "definition 0: variable 3 is out of scope"
    [ def 1 0 (M.PConstr (M.PApp (2, [ M.PVar 0; M.PVar 3 ]), M.PVar 0, 3)) ] [ 0 ];
  check "exists variables are in scope"
    (Result.is_ok
       (Decode.decode_patterns
          (buf (set_words [ def 1 0 (M.PApp (2, [ M.PVar 0; M.PExists (5, M.PVar 5);
                                                  M.PExistsF (4, M.PFunVar (4, [])) ])) ] [ 0 ]))));
  (* wrong pbinds / pfbinds claims *)
  ill_set "pbinds claims a parameter bound on one alternate only"
    "definition 0: pbinds claims parameter 1, which the body does not bind on every match"
    [ { M.nparams = 2; nfparams = 0; body = M.PAlt (M.PVar 0, M.PApp (1, [ M.PVar 0; M.PVar 1 ])); pbinds = [ 0; 1 ]; pfbinds = [] } ]
    [ 0 ];
  ill_set "pfbinds claims an unbound operator parameter"
    "definition 0: pfbinds claims operator parameter 0, which the body does not bind"
    [ { M.nparams = 1; nfparams = 1; body = M.PVar 0; pbinds = [ 0 ]; pfbinds = [ 0 ] } ]
    [ 0 ];
  (* claims are checked as a greatest fixpoint: a definition that never
     matches may claim anything it passes on (vacuously true) *)
  let ok_set defs roots = Result.is_ok (Decode.decode_patterns (buf (set_words defs roots))) in
  check "the loop may claim its parameter" (ok_set [ { loop_def with M.pbinds = [ 0 ] } ] [ 0 ]);
  check "a claim through a call with the wrong arity (never matches)"
    (ok_set
       [ unary_chain; { M.nparams = 1; nfparams = 0; body = M.PCall (0, [ 0 ], []); pbinds = [ 0 ]; pfbinds = [] } ]
       [ 1 ]);
  ill_set "mutual recursion does not justify an unbound parameter"
    "definition 1: pbinds claims parameter 1"
    [
      { M.nparams = 2; nfparams = 0; body = M.PAlt (M.PCall (1, [ 0; 1 ], []), M.PVar 0); pbinds = [ 0 ]; pfbinds = [] };
      { M.nparams = 2; nfparams = 0; body = M.PApp (neg, [ M.PCall (0, [ 0; 1 ], []) ]); pbinds = [ 0; 1 ]; pfbinds = [] };
    ]
    [ 0 ];
  (* a definition that is not a root is checked too *)
  ill_set "ill-formed non-root definition" "definition 1: a guard reads variable 4"
    [ auto_def p_mmt; auto_def (M.PGuard (M.PVar 0, M.GEq (M.EAttr (4, 0), M.EConst 0))) ]
    [ 0 ];
  (* guards see through calls: UnaryChain binds x and F *)
  check "guard after a call"
    (Result.is_ok
       (Decode.decode_patterns
          (buf
             (set_words
                [
                  unary_chain;
                  {
                    M.nparams = 1;
                    nfparams = 1;
                    body = M.PGuard (M.PCall (0, [ 0 ], [ 0 ]), M.GEq (M.EAttr (0, 0), M.EFAttr (0, 2)));
                    pbinds = [ 0 ];
                    pfbinds = [ 0 ];
                  };
                ]
                [ 1 ]))));
  ill_set "guard after a call that binds less"
    "definition 1: a guard reads operator variable 0"
    [
      { unary_chain with M.pfbinds = [] };
      {
        M.nparams = 1;
        nfparams = 1;
        body = M.PGuard (M.PCall (0, [ 0 ], [ 0 ]), M.GEq (M.EFAttr (0, 2), M.EConst 7));
        pbinds = [];
        pfbinds = [];
      };
    ]
    [ 1 ];
  (* malformed takes precedence over ill-formed *)
  expect_error "malformed before ill-formed" Decode.Malformed "root 0"
    (Decode.decode_patterns (buf (set_words [ bad_claim ] [ 1 ])))

(* ------------------------------------------------------------ engine *)

let code f =
  try
    f ();
    0
  with Engine.Error (c, _) -> c

let test_engine () =
  let gh = Engine.graph_load (buf (graph_words ~sym:g_sym g_nodes)) in
  let ph = Engine.patterns_load (buf (patterns_words [ p_mmt; p_guarded; p_alt ])) in
  let m index root = Engine.match_one ~graph:gh ~patterns:ph ~index ~root ~fuel:0 in
  check "mmt at 3" (m 0 3 = (0, [ (x, 0); (y, 1) ], []));
  check "mmt at 4" (m 0 4 = (1, [], []));
  check "mmt at 0" (m 0 0 = (1, [], []));
  (* x.shape[1] = 8, y.shape[1] = 4 -> the guard fails *)
  check "guarded at 3" (m 1 3 = (1, [], []));
  check "alt at 3" (m 2 3 = (0, [ (x, 0); (y, 1) ], []));
  check "alt at 4" (m 2 4 = (0, [ (x, 0); (y, 1) ], []));
  check "out of fuel" (Engine.match_one ~graph:gh ~patterns:ph ~index:0 ~root:3 ~fuel:2 = (2, [], []));
  check "handle sizes" (Engine.handle_size gh = 5 && Engine.handle_size ph = 3);
  let r = Engine.match_all_words ~graph:gh ~patterns:ph ~fuel:0 in
  let words = Array.init (Bigarray.Array1.dim r) (fun k -> Int64.to_int r.{k}) in
  check "match_all layout"
    (words
    = [| 3; 0; 3; 0; 2; 0; 0; 1; 1; 0; 2; 3; 0; 2; 0; 0; 1; 1; 0; 2; 4; 0; 2; 0; 0; 1; 1; 0 |]);
  check "bad handle" (code (fun () -> ignore (Engine.handle_size 999)) = Codes.e_bad_handle);
  check "wrong kind"
    (code (fun () -> ignore (Engine.match_one ~graph:ph ~patterns:ph ~index:0 ~root:0 ~fuel:0))
    = Codes.e_bad_handle);
  check "root out of range" (code (fun () -> ignore (m 0 5)) = Codes.e_out_of_range);
  check "index out of range" (code (fun () -> ignore (m 3 0)) = Codes.e_out_of_range);
  check "negative index" (code (fun () -> ignore (m (-1) 0)) = Codes.e_out_of_range);
  check "malformed load" (code (fun () -> ignore (Engine.graph_load (buf [ 1L ]))) = Codes.e_malformed);
  check "ill-formed load"
    (code (fun () ->
         ignore (Engine.patterns_load (buf (set_words [ bad_claim ] [ 0 ]))))
    = Codes.e_ill_formed);
  check "too deep load"
    (code (fun () -> ignore (Engine.patterns_load (buf (patterns_words [ nest_alt 10001 ])))) = Codes.e_too_deep);
  Engine.release gh;
  check "released" (code (fun () -> ignore (Engine.handle_size gh)) = Codes.e_bad_handle);
  check "double release" (code (fun () -> Engine.release gh) = Codes.e_bad_handle);
  Engine.release ph

(* A graph of unary chains:
   0 leaf, 1 Neg(0), 2 Neg(1), 3 Neg(2), 4 ReLU(3), 5 ReLU(4), 6 Neg(5),
   7 Add(3, 6), 8 Trans(0) *)
let chain_nodes =
  [
    (leaf, [], [ (0, 1) ]);
    (neg, [ 0 ], [ (0, 1) ]);
    (neg, [ 1 ], [ (0, 1) ]);
    (neg, [ 2 ], [ (0, 1) ]);
    (relu, [ 3 ], [ (0, 1) ]);
    (relu, [ 4 ], [ (0, 1) ]);
    (neg, [ 5 ], [ (0, 1) ]);
    (5, [ 3; 6 ], []);
    (trans, [ 0 ], [ (0, 1) ]);
  ]

let test_engine_full () =
  let gh = Engine.graph_load (buf (graph_words ~sym:g_sym chain_nodes)) in
  let defs =
    [
      (* 0 *) unary_chain;
      (* 1: UnaryOp(x) = ∃F. F(x) ; guard(F.op_class = 7) *)
      {
        M.nparams = 1;
        nfparams = 0;
        body =
          M.PExistsF (0, M.PGuard (M.PFunVar (0, [ M.PVar 0 ]), M.GEq (M.EFAttr (0, op_class), M.EConst 7)));
        pbinds = [ 0 ];
        pfbinds = [];
      };
      (* 2: Add(a, b) ; (UnaryChain(a; F) ≈ b) -- b is a chain of F over a?
         no: the constraint matches UnaryChain(c; F) at the node bound to b,
         with c, F parameters 2 and 0 *)
      {
        M.nparams = 3;
        nfparams = 1;
        body = M.PConstr (M.PApp (5, [ M.PVar 0; M.PVar 1 ]), M.PCall (0, [ 2 ], [ 0 ]), 1);
        pbinds = [ 0; 1; 2 ];
        pfbinds = [ 0 ];
      };
      (* 3: the loop P(x) = P(x) *)
      { loop_def with M.body = M.PCall (3, [ 0 ], []) };
      (* 4: Neg(∃y. y) — a local variable, not reported *)
      { M.nparams = 0; nfparams = 0; body = M.PApp (neg, [ M.PExists (0, M.PVar 0) ]); pbinds = []; pfbinds = [] };
      (* 5: UnaryChain called with the wrong arity: fails, never an error *)
      { M.nparams = 1; nfparams = 0; body = M.PCall (0, [ 0 ], []); pbinds = []; pfbinds = [] };
      (* 6: F(F(x)) with F.rank... F read through a sym attr of another id *)
      {
        M.nparams = 1;
        nfparams = 1;
        body = M.PGuard (M.PFunVar (0, [ M.PFunVar (0, [ M.PVar 0 ]) ]), M.GLt (M.EFAttr (0, 0), M.EConst 0));
        pbinds = [ 0 ];
        pfbinds = [ 0 ];
      };
      (* 7: P(x) = P(x) ‖ x : left recursion, runs out of fuel *)
      { M.nparams = 1; nfparams = 0; body = M.PAlt (M.PCall (7, [ 0 ], []), M.PVar 0); pbinds = [ 0 ]; pfbinds = [] };
    ]
  in
  let ph = Engine.patterns_load (buf (set_words defs [ 0; 1; 2; 3; 4; 5; 6; 7; 0 ])) in
  check "size = number of roots" (Engine.handle_size ph = 9);
  let m ?(fuel = 0) index root = Engine.match_one ~graph:gh ~patterns:ph ~index ~root ~fuel in
  (* UnaryChain at 3: Neg(Neg(Neg(leaf))): x = leaf, F = Neg *)
  check "chain at 3" (m 0 3 = (0, [ (0, 0) ], [ (0, neg) ]));
  check "chain at 1" (m 0 1 = (0, [ (0, 0) ], [ (0, neg) ]));
  (* at 5: ReLU(ReLU(Neg ..)): the chain of ReLUs ends at 3 *)
  check "chain at 5" (m 0 5 = (0, [ (0, 3) ], [ (0, relu) ]));
  check "chain at 6" (m 0 6 = (0, [ (0, 5) ], [ (0, neg) ]));
  check "chain at a leaf" (m 0 0 = (1, [], []));
  check "chain at a binary node" (m 0 7 = (1, [], []));
  check "chain at Trans" (m 0 8 = (0, [ (0, 0) ], [ (0, trans) ]));
  (* root 8 is definition 0 again *)
  check "second root of the same definition" (m 8 3 = m 0 3);
  (* UnaryOp: class 7 (Neg, ReLU), not Trans (class 9) nor a leaf (no class) *)
  check "unary op at 4" (m 1 4 = (0, [ (0, 3) ], []));
  check "unary op at 8 (class 9)" (m 1 8 = (1, [], []));
  check "unary op at 0" (m 1 0 = (1, [], []));
  (* Add(3, 6) ; (UnaryChain(c; F) ≈ 6): 6 = Neg(5) with 5 a ReLU: c = 5 *)
  check "constraint at 7" (m 2 7 = (0, [ (0, 3); (1, 6); (2, 5) ], [ (0, neg) ]));
  check "constraint at 3" (m 2 3 = (1, [], []));
  (* the loop P(x) = P(x): its root-operator index is empty, so no match
     (Entry.match_root_index_no), whatever the fuel *)
  check "loop, fuel 1000" (m ~fuel:1000 3 0 = (1, [], []));
  check "loop, fuel 1" (m ~fuel:1 3 5 = (1, [], []));
  check "loop, default fuel" (m 3 5 = (1, [], []));
  (* local variable not reported *)
  check "local not reported" (m 4 2 = (0, [], []));
  check "local: no match" (m 4 4 = (1, [], []));
  check "wrong arity call" (m 5 3 = (1, [], []));
  (* F(F(x)) ; F.attr0 < 0: Neg has attribute 0 = -1 *)
  check "F(F(x)) at 3" (m 6 3 = (0, [ (0, 1) ], [ (0, neg) ]));
  check "F(F(x)) at 5 (ReLU has no attribute 0)" (m 6 5 = (1, [], []));
  check "F(F(x)) at 4 (different operators)" (m 6 4 = (1, [], []));
  check "left recursion, fuel 10000" (m ~fuel:10000 7 0 = (2, [], []));
  (* match_all: entries for matches and out-of-fuel, with operator bindings *)
  let r = Engine.match_all_words ~graph:gh ~patterns:ph ~fuel:5000 in
  let words = Array.init (Bigarray.Array1.dim r) (fun k -> Int64.to_int r.{k}) in
  (* decode the entries *)
  let entries = ref [] and pos = ref 1 in
  let pairs () =
    let n = words.(!pos) in
    let l = List.init n (fun k -> (words.(!pos + 1 + (2 * k)), words.(!pos + 2 + (2 * k)))) in
    pos := !pos + 1 + (2 * n);
    l
  in
  for _ = 1 to words.(0) do
    let pi = words.(!pos) and root = words.(!pos + 1) and st = words.(!pos + 2) in
    pos := !pos + 3;
    let b = pairs () in
    let fb = pairs () in
    entries := (pi, root, st, b, fb) :: !entries
  done;
  let entries = List.rev !entries in
  check "match_all: whole buffer" (!pos = Array.length words);
  check "match_all: order"
    (List.sort compare (List.map (fun (pi, root, _, _, _) -> (root, pi)) entries)
    = List.map (fun (pi, root, _, _, _) -> (root, pi)) entries);
  let agrees =
    List.for_all
      (fun (pi, root, st, b, fb) ->
        let st', b', fb' = Engine.match_one ~graph:gh ~patterns:ph ~index:pi ~root ~fuel:5000 in
        st <> 1 && (st, b, fb) = (st', b', fb'))
      entries
  in
  check "match_all agrees with match" agrees;
  let count = ref 0 in
  for root = 0 to 8 do
    for pi = 0 to 8 do
      let st, _, _ = Engine.match_one ~graph:gh ~patterns:ph ~index:pi ~root ~fuel:5000 in
      if st <> 1 then incr count
    done
  done;
  check "match_all: every non-failure listed" (List.length entries = !count);
  check "match_all: the loop never listed"
    (List.for_all (fun (pi, _, _, _, _) -> pi <> 3) entries);
  check "match_all: left recursion out of fuel at every node"
    (List.length (List.filter (fun (pi, _, st, _, _) -> pi = 7 && st = 2) entries) = 9);
  check "match_all: chain entry"
    (List.mem (0, 5, 0, [ (0, 3) ], [ (0, relu) ]) entries);
  Engine.release ph;
  Engine.release gh;
  (* the prepared forms the engine runs are the specification functions of
     theories/Entry.v (set_match_correct, set_match_all_correct,
     set_candidates_correct), checked here on every root, node and symbol *)
  let mg =
    match Decode.decode_graph (buf (graph_words ~sym:g_sym chain_nodes)) with
    | Ok g -> Repr.to_matcher g
    | Error e -> failwith e.Decode.message
  in
  let roots = [ 0; 1; 2; 3; 4; 5; 6; 7; 0 ] in
  let ps = match M.load_set defs roots with Some ps -> ps | None -> failwith "load_set" in
  check "Engine.pset_of_buf = Matcher.load_set"
    ((Engine.pset_of_buf (buf (set_words defs roots))).Engine.ps = ps);
  let same_match = ref true and same_all = ref true and same_cands = ref true in
  List.iter
    (fun fuel ->
      List.iteri
        (fun i r ->
          for t = 0 to 8 do
            if M.set_match mg ps fuel i t <> M.match_root mg defs fuel r t then
              same_match := false
          done)
        roots;
      if M.set_match_all mg ps fuel 9 <> M.match_all mg defs fuel roots 9 then same_all := false;
      if
        List.rev (M.set_match_all_fold mg ps fuel 9 (fun acc i t a -> ((i, t), a) :: acc) [])
        <> M.set_match_all mg ps fuel 9
      then same_all := false)
    [ 1; 3; 10; 5000 ];
  for f = 0 to 12 do
    let sa = M.sym_attrs mg f in
    if M.set_candidates ps f sa <> M.candidates defs roots f sa then same_cands := false
  done;
  check "set_match = match_root" !same_match;
  check "set_match_all = match_all = set_match_all_fold's entries" !same_all;
  check "set_candidates = candidates" !same_cands;
  (* the shapes index (KidIndex.v): the prepared form with the set's
     kid_table is candidates_at (set_candidates_at_correct), within
     candidates, and a root it leaves out has no match at the node *)
  let kt = M.kid_table defs roots in
  let same_at = ref true and within = ref true and sound = ref true in
  for t = 0 to 8 do
    let f = M.label mg t in
    let sa = M.sym_attrs mg f and ks = M.kid_syms mg t in
    let at = M.set_candidates_at ps kt f sa ks in
    if at <> M.candidates_at defs roots f sa ks then same_at := false;
    if not (List.for_all (fun i -> List.mem i (M.set_candidates ps f sa)) at) then
      within := false;
    List.iteri
      (fun i _ ->
        if not (List.mem i at) then
          match M.set_match mg ps 5000 i t with M.RMatch _ -> sound := false | _ -> ())
      roots
  done;
  check "set_candidates_at = candidates_at" !same_at;
  check "candidates_at within candidates" !within;
  check "no match outside candidates_at" !sound;
  (* the index: UnaryChain may be any operator (an operator variable at
     the root), UnaryOp an operator of class 7 (its guard), the
     constraint's root is Add (5), the loop none, the left recursion
     anything *)
  let idx = M.root_index defs in
  check "index" (List.map (M.ri_find idx) [ 0; 1; 2; 3; 4; 5; 6; 7 ]
                 = M.[ RAny; RSyms ([], [ (op_class, 7) ]); RSyms ([ 5 ], []); RSyms ([], []);
                       RSyms ([ neg ], []); RAny; RAny; RAny ]);
  let no_attrs _ = None in
  check "candidates of Neg (class 7)"
    (M.set_candidates ps neg (M.sym_attrs mg neg) = [ 0; 1; 4; 5; 6; 7; 8 ]);
  check "candidates of Neg without its class"
    (M.set_candidates ps neg no_attrs = [ 0; 4; 5; 6; 7; 8 ]);
  check "candidates of Add (no class)" (M.set_candidates ps 5 (M.sym_attrs mg 5) = [ 0; 2; 5; 6; 7; 8 ]);
  (* an operator variable at the root guarded by its class, F(x) ; F.a = 7
     (a = 2, as OPCLASS): the operators of class 7, and Relu by name in
     the alternative; candidates read the class given for the operator *)
  let cls_def =
    { M.nparams = 1; nfparams = 1;
      body = M.PAlt (M.PGuard (M.PFunVar (0, [ M.PVar 0 ]),
                               M.GAnd (M.GTrue, M.GEq (M.EConst 7, M.EFAttr (0, 2)))),
                     M.PApp (relu, [ M.PVar 0 ]));
      pbinds = [ 0 ]; pfbinds = [ 0 ] } in
  check "class guard: index"
    (M.ri_find (M.root_index [ cls_def ]) 0 = M.RSyms ([ relu ], [ (2, 7) ]));
  let cps = match M.load_set [ cls_def ] [ 0 ] with Some p -> p | None -> failwith "load_set" in
  let cls_of c a = if a = 2 then Some c else None in
  check "class guard: an operator of class 7 is a candidate"
    (M.set_candidates cps neg (cls_of 7) = [ 0 ]);
  check "class guard: one of class 3 is not" (M.set_candidates cps neg (cls_of 3) = []);
  check "class guard: one without a class is not" (M.set_candidates cps neg no_attrs = []);
  check "class guard: Relu by name" (M.set_candidates cps relu no_attrs = [ 0 ]);
  (* P(x) = P(x) ‖ Relu(x), a pattern whose search never ends: Relu only; no match at a Neg *)
  let pr = { M.nparams = 1; nfparams = 0; body = M.PAlt (M.PCall (0, [ 0 ], []), M.PApp (relu, [ M.PVar 0 ]));
             pbinds = [ 0 ]; pfbinds = [] } in
  check "P = P || Relu: index" (M.ri_find (M.root_index [ pr ]) 0 = M.RSyms ([ relu ], []));
  check "P = P || Relu at a Neg: no match" (M.match_root mg [ pr ] 0 0 2 = M.RNoMatch);
  check "P = P || Relu at a ReLU: out of fuel" (M.match_root mg [ pr ] 1000 0 4 = M.ROutOfFuel);
  (* a chain of calls at the root longer than the iteration's rounds:
     every definition gets "any" (sound, and the matcher then decides) *)
  let chain n =
    List.init n (fun i ->
        if i = n - 1 then { M.nparams = 1; nfparams = 0; body = M.PApp (neg, [ M.PVar 0 ]); pbinds = [ 0 ]; pfbinds = [] }
        else { M.nparams = 1; nfparams = 0; body = M.PCall (i + 1, [ 0 ], []); pbinds = [ 0 ]; pfbinds = [] })
  in
  check "call chain of 64: converges" (M.ri_find (M.root_index (chain 64)) 0 = M.RSyms ([ neg ], []));
  check "call chain of 66: any" (M.ri_find (M.root_index (chain 66)) 0 = M.RAny)

(* The loop P(x) = x ; (P(x) ≈ x) at the default fuel terminates (steps, not
   time) *)
let test_default_fuel () =
  let gh = Engine.graph_load (buf (graph_words [ (leaf, [], []) ])) in
  let ph = Engine.patterns_load (buf (set_words [ constr_loop_def ] [ 0 ])) in
  let t0 = Sys.time () in
  check "default fuel: out of fuel" (Engine.match_one ~graph:gh ~patterns:ph ~index:0 ~root:0 ~fuel:0 = (2, [], []));
  Printf.printf "  P(x) = x ; (P(x) ≈ x) at the default fuel (2^26 steps): %.2f s\n" (Sys.time () -. t0);
  Engine.release ph;
  Engine.release gh

(* ------------------------------------------------------ graph extension *)

let ext_words ?(sym = []) ?(magic = Decode.magic_extension) base
    (nodes : (int * int list * (int * int) list) list) : int64 list =
  match graph_words ~sym nodes with
  | _ :: _ :: rest -> [ magic; 2L; i base ] @ rest
  | _ -> assert false

let rec take k = function x :: r when k > 0 -> x :: take (k - 1) r | _ -> []

let rec drop k = function _ :: r when k > 0 -> drop (k - 1) r | l -> l

(* Loading the first [s] nodes and extending with the rest (in one piece or
   node by node, with the symbol attributes in the base, the extension, or
   both) gives the same graph, to the matcher, as loading it whole. *)
let test_extend () =
  let unary_op =
    {
      M.nparams = 1;
      nfparams = 0;
      body =
        M.PExistsF (0, M.PGuard (M.PFunVar (0, [ M.PVar 0 ]), M.GEq (M.EFAttr (0, op_class), M.EConst 7)));
      pbinds = [ 0 ];
      pfbinds = [];
    }
  in
  let ph = Engine.patterns_load (buf (set_words [ unary_chain; unary_op ] [ 0; 1 ])) in
  let all gh =
    let r = Engine.match_all_words ~graph:gh ~patterns:ph ~fuel:0 in
    Array.init (Bigarray.Array1.dim r) (fun k -> r.{k})
  in
  let whole = Engine.graph_load (buf (graph_words ~sym:g_sym chain_nodes)) in
  let expected = all whole in
  check "extend: the reference finds matches" (Array.length expected > 1 && expected.(0) > 0L);
  let n = List.length chain_nodes in
  for s = 0 to n do
    List.iter
      (fun (how, base_sym, ext_sym, piecewise) ->
        (* node by node with nothing left to add: the attributes go in the base *)
        let base_sym = if piecewise && s = n then g_sym else base_sym in
        let gh = Engine.graph_load (buf (graph_words ~sym:base_sym (take s chain_nodes))) in
        let rest = drop s chain_nodes in
        if piecewise then
          List.iteri
            (fun k node -> Engine.graph_extend gh (buf (ext_words ~sym:ext_sym (s + k) [ node ])))
            rest
        else Engine.graph_extend gh (buf (ext_words ~sym:ext_sym s rest));
        check (Printf.sprintf "extend at %d (%s): size" s how) (Engine.handle_size gh = n);
        check (Printf.sprintf "extend at %d (%s): same matches" s how) (all gh = expected);
        Engine.release gh)
      [
        ("sym in base", g_sym, [], false);
        ("sym in extension", [], g_sym, false);
        ("sym in both", g_sym, g_sym, false);
        ("node by node", [], g_sym, true);
      ]
  done;
  (* errors leave the graph as it was *)
  let gh = Engine.graph_load (buf (graph_words ~sym:g_sym (take 5 chain_nodes))) in
  let before = all gh in
  let rest = drop 5 chain_nodes in
  let err name c b =
    check ("extend error: " ^ name) (code (fun () -> Engine.graph_extend gh (buf b)) = c);
    check ("extend error leaves the graph: " ^ name) (Engine.handle_size gh = 5 && all gh = before)
  in
  err "base too small" Codes.e_out_of_range (ext_words 4 rest);
  err "base too large" Codes.e_out_of_range (ext_words 6 rest);
  err "child out of range" Codes.e_malformed (ext_words 5 [ (neg, [ 6 ], []) ]);
  err "negative child" Codes.e_malformed (ext_words 5 [ (neg, [ -1 ], []) ]);
  err "conflicting symbol attribute" Codes.e_malformed
    (ext_words ~sym:[ (neg, op_class, 8) ] 5 [ (neg, [ 4 ], []) ]);
  err "a graph buffer" Codes.e_malformed (graph_words rest);
  err "bad magic" Codes.e_malformed (ext_words ~magic:Decode.magic_patterns 5 rest);
  err "truncated" Codes.e_malformed (take 10 (ext_words 5 rest));
  err "trailing word" Codes.e_malformed (ext_words 5 rest @ [ 0L ]);
  err "header only" Codes.e_malformed [ Decode.magic_extension; 2L; 5L ];
  err "duplicate attribute" Codes.e_malformed (ext_words 5 [ (neg, [ 4 ], [ (0, 1); (0, 1) ]) ]);
  check "extend error: pattern handle"
    (code (fun () -> Engine.graph_extend ph (buf (ext_words 5 rest))) = Codes.e_bad_handle);
  (* an empty extension is fine; then the rest *)
  Engine.graph_extend gh (buf (ext_words 5 []));
  Engine.graph_extend gh (buf (ext_words ~sym:g_sym 5 rest));
  check "extend after errors: same matches" (all gh = expected);
  (* many small extensions (spare capacity reused): a chain of 2000 Negs *)
  let big = Engine.graph_load (buf (graph_words ~sym:g_sym [ (leaf, [], [ (0, 1) ]) ])) in
  for t = 1 to 2000 do
    Engine.graph_extend big (buf (ext_words t [ (neg, [ t - 1 ], [ (0, 1) ]) ]))
  done;
  check "2000 extensions: size" (Engine.handle_size big = 2001);
  check "2000 extensions: chain from the top"
    (Engine.match_one ~graph:big ~patterns:ph ~index:0 ~root:2000 ~fuel:0 = (0, [ (0, 0) ], [ (0, neg) ]));
  Engine.release big;
  (* the symbol attributes: an extension repeating known pairs keeps the
     graph's arrays (no copy of the table per extension); a new pair is
     merged in order; a conflict after a new pair leaves the graph as it was *)
  let sym_of h =
    let r = (Engine.get_graph h).Engine.repr in
    (r.Repr.sym_syms, r.Repr.sym_ids, r.Repr.sym_vals)
  in
  let triples (s, a, v) = Array.to_list (Array.mapi (fun k x -> (x, a.(k), v.(k))) s) in
  let sh = Engine.graph_load (buf (graph_words ~sym:g_sym (take 5 chain_nodes))) in
  let (s0, a0, v0) as t0 = sym_of sh in
  Engine.graph_extend sh (buf (ext_words ~sym:[ (neg, op_class, 7); (relu, op_class, 7) ] 5 [ (neg, [ 4 ], []) ]));
  let s1, a1, v1 = sym_of sh in
  check "extend: known symbol attributes keep the graph's arrays" (s1 == s0 && a1 == a0 && v1 == v0);
  Engine.graph_extend sh (buf (ext_words ~sym:[ (neg, op_class, 7); (leaf, op_class, 5) ] 6 [ (leaf, [], []) ]));
  check "extend: a new symbol attribute is merged in order"
    (triples (sym_of sh) = List.sort compare ((leaf, op_class, 5) :: triples t0));
  let before = all sh and t2 = sym_of sh in
  check "extend error: conflict after a new symbol attribute"
    (code (fun () ->
         Engine.graph_extend sh
           (buf (ext_words ~sym:[ (1, op_class, 1); (trans, op_class, 8) ] 7 [ (neg, [ 6 ], []) ])))
    = Codes.e_malformed);
  check "extend error leaves the graph: conflict after a new symbol attribute"
    (Engine.handle_size sh = 7 && all sh = before && triples (sym_of sh) = triples t2);
  Engine.release sh;
  Engine.release gh;
  Engine.release whole;
  Engine.release ph

let timed name f =
  let t0 = Sys.time () in
  f ();
  Printf.printf "  %-22s %.2f s\n%!" name (Sys.time () -. t0)


(* ------------------------------------------------------- multi-root *)

(* The extracted functions behind pypm_match_multi on a small graph: the
   users table (Multi.users_map) lists every user; upward traversal
   (match_all_multi_u) gives the entries the index-only search gives (both
   try candidates in id order, and the users candidates contain every node
   that can match: Multi.up_cands_complete); the matches are the expected
   sets, once each; a root sharing no variable falls back to the index. *)
let test_multi () =
  let leaf = 1 and relu = 10 and lin = 11 and neg = 12 in
  (* 0..2 inputs x0 x1 w; relu/lin/neg over x0, relu/lin over x1, relu over x2 *)
  let nodes =
    [ (leaf, [], []); (leaf, [], []); (leaf, [], []);
      (relu, [ 0 ], []); (lin, [ 0; 2 ], []); (neg, [ 0 ], []);
      (relu, [ 1 ], []); (lin, [ 1; 2 ], []); (lin, [ 2; 2 ], []); (relu, [ 2 ], []) ]
  in
  match Decode.decode_graph (buf (graph_words nodes)) with
  | Error e -> check ("multi graph: " ^ e.Decode.message) false
  | Ok g ->
      let mg = Repr.to_matcher g in
      let n = g.Repr.n_nodes in
      let um = M.users_map mg n in
      let users c = List.filter (fun u -> List.mem c (mg.M.children u)) (List.init n Fun.id) in
      check "users_map = the users, in order"
        (List.for_all (fun c -> M.ufind c um = users c) (List.init n Fun.id));
      let d body = { M.nparams = 2; nfparams = 0; body; pbinds = []; pfbinds = [] } in
      let defs =
        [ d (M.PApp (relu, [ M.PVar 0 ])); d (M.PApp (lin, [ M.PVar 0; M.PVar 1 ]));
          d (M.PApp (neg, [ M.PVar 0 ])); d (M.PApp (lin, [ M.PVar 1; M.PVar 1 ])) ]
      in
      let mp roots = { M.mp_n = 2; mp_m = 0; mp_roots = roots; mp_guard = M.GTrue } in
      let sets es =
        List.filter_map
          (function _, M.MMatch (ts, _, _) -> Some (List.sort compare ts) | _ -> None) es
      in
      (* Multi.mp_scoped: every root's parameters are shared variables *)
      check "mp_scoped: two parameters, two shared variables" (M.mp_scoped defs (mp [ 0; 1 ]));
      check "mp_scoped: two parameters, one shared variable"
        (not (M.mp_scoped defs { (mp [ 0; 1 ]) with M.mp_n = 1 }));
      check "mp_scoped: an operator parameter, no shared operator variable"
        (not (M.mp_scoped ({ (d (M.PVar 0)) with M.nfparams = 1 } :: defs) (mp [ 1; 0 ])));
      check "mp_scoped: a root naming no definition" (not (M.mp_scoped defs (mp [ 0; 9 ])));
      let fuel = M.effective_fuel 0 in
      List.iter
        (fun (name, roots, expected) ->
          let up = M.match_all_multi_u mg defs um fuel n (mp roots) in
          let idx = M.match_all_multi_idx mg defs fuel n (mp roots) in
          check (name ^ ": upward traversal = index-only entries") (up = idx);
          check (name ^ ": the expected sets") (List.sort compare (sets up) = expected);
          List.iter
            (fun t ->
              check (name ^ ": match_multi_u = match_multi_idx")
                (M.match_multi_u mg defs um fuel n (mp roots) t
                = M.match_multi_idx mg defs fuel n (mp roots) t))
            (List.init n Fun.id))
        [ ("relu, lin", [ 0; 1 ], [ [ 3; 4 ]; [ 6; 7 ]; [ 8; 9 ] ]);
          ("lin, relu", [ 1; 0 ], [ [ 3; 4 ]; [ 6; 7 ]; [ 8; 9 ] ]);
          ("relu, lin, neg", [ 0; 1; 2 ], [ [ 3; 4; 5 ] ]);
          (* lin(w, w) shares w with lin(x, w) only through its first argument *)
          ("lin, lin(w, w)", [ 1; 3 ], [ [ 4; 8 ]; [ 7; 8 ] ]) ]

let () =
  timed "graph_valid" test_graph_valid;
  timed "graph_malformed" test_graph_malformed;
  timed "patterns_valid" test_patterns_valid;
  timed "patterns_malformed" test_patterns_malformed;
  timed "depth" test_depth;
  timed "wf_cost" test_wf_cost;
  timed "ill_formed" test_ill_formed;
  timed "engine" test_engine;
  timed "engine_full" test_engine_full;
  timed "default_fuel" test_default_fuel;
  timed "extend" test_extend;
  timed "multi" test_multi;
  Printf.printf "test_decode: %d checks, %d failures\n" !checks !failures;
  if !failures > 0 then exit 1
