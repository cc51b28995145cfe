(* The binary-format reader: a validating decoder of docs/internals/format.md
   (VERSION 2) into the engine's representation (repr.ml).

   Input: a Bigarray of int64 words (on the C side a zero-copy view of the
   caller's buffer, so the words are read once, straight into the OCaml
   structures).  Output: [Repr.graph] / [Repr.patterns] (the definition
   table and the roots), or an error naming the problem and where it is.

   Every field is checked before it is used: magic, version, counts against
   the words that are left, ids in [0, 2^62), values in OCaml's 63-bit int
   range, children in [0, n_nodes), distinct attribute ids per node and
   distinct (symbol, attribute id) pairs, call targets and roots in
   [0, n_defs), pbinds/pfbinds entries in [0, n_params)/[0, n_fparams), no
   trailing words, nesting depth <= max_depth, and well-formedness
   ([Matcher.wf_defs], the extracted Coq check, which covers every body and
   so every root, scope included: [Syntax.scoped_def]).

   Limits (docs/internals/format.md, "Limits"), which bound the stack the extracted
   (non-tail-recursive) matcher can use and the time of the checks on any
   accepted input:
   - a graph node has at most [max_arity] children;
   - a body is at most [max_pattern_words] words;
   - a definition has at most [max_params] term and as many operator
     parameters, and claims at most [max_params] entries in each of pbinds
     and pfbinds;
   - a set has at most [max_defs] definitions;
   - the cost bound [Wf_cost.bound] of the well-formedness check is at most
     [Wf_cost.limit].

   The reason given for an ill-formed set comes from [Wf_explain]. *)

type kind = Malformed | Ill_formed | Too_deep

type error = { kind : kind; message : string }

type buf = (int64, Bigarray.int64_elt, Bigarray.c_layout) Bigarray.Array1.t

let magic_graph = 0x485052474d505950L (* "PYPMGRPH" little-endian *)

let magic_patterns = 0x535441504d505950L (* "PYPMPATS" *)

let magic_extension = 0x545845474d505950L (* "PYPMGEXT" *)

let version = 2L

let max_depth = 10_000

let max_arity = 1 lsl 20

let max_pattern_words = 1 lsl 16

let max_params = 1 lsl 16

let max_defs = 1 lsl 16

let kind_name = function
  | Malformed -> "malformed"
  | Ill_formed -> "ill-formed"
  | Too_deep -> "too deep"

let of_array (a : int64 array) : buf =
  Bigarray.Array1.of_array Bigarray.int64 Bigarray.c_layout a

exception Fail of kind * string

let fail k fmt = Printf.ksprintf (fun s -> raise (Fail (k, s))) fmt

let two62 = 0x4000000000000000L

(* ids: [0, 2^62) *)
let is_id (v : int64) = v >= 0L && v < two62

(* values: (-2^62, 2^62), i.e. |v| <= 2^62 - 1.  The range is decided by the
   extracted [Values.value_ok], the precondition under which the proofs show
   that guard arithmetic on OCaml ints is exact (Values.eval_expr_value_ok);
   the word is first converted to [int] exactly (a word outside OCaml's
   range is rejected, never truncated).  OCaml's min_int = -2^62 is
   excluded by value_ok. *)
let min_int64 = Int64.of_int min_int

let max_int64 = Int64.of_int max_int

let is_value (v : int64) =
  v >= min_int64 && v <= max_int64 && Matcher.value_ok (Int64.to_int v)

let get (b : buf) i = Bigarray.Array1.unsafe_get b i

let check_header what (b : buf) magic magic_name =
  let len = Bigarray.Array1.dim b in
  if len < 3 then
    fail Malformed "%s: buffer has %d words, the header needs 3 (magic, version, count)"
      what len;
  let m = get b 0 in
  if not (Int64.equal m magic) then
    fail Malformed "%s: bad magic 0x%016Lx (expected 0x%016Lx, %S)" what m magic
      magic_name;
  let v = get b 1 in
  if not (Int64.equal v version) then
    fail Malformed "%s: unsupported format version %Ld (this library reads version %Ld)"
      what v version;
  len

(* ------------------------------------------------------------------ graph *)

(* Sort the attribute slice [lo, hi) of [ids]/[vals] by id. *)
let sort_slice ids vals lo hi =
  let n = hi - lo in
  if n <= 16 then
    for i = lo + 1 to hi - 1 do
      let k = ids.(i) and v = vals.(i) in
      let j = ref (i - 1) in
      while !j >= lo && ids.(!j) > k do
        ids.(!j + 1) <- ids.(!j);
        vals.(!j + 1) <- vals.(!j);
        decr j
      done;
      ids.(!j + 1) <- k;
      vals.(!j + 1) <- v
    done
  else begin
    let pairs = Array.init n (fun i -> (ids.(lo + i), vals.(lo + i))) in
    Array.sort (fun (a, _) (b, _) -> compare (a : int) b) pairs;
    Array.iteri
      (fun i (k, v) ->
        ids.(lo + i) <- k;
        vals.(lo + i) <- v)
      pairs
  end

(* The node records and the symbol attributes of a graph buffer (or of a
   graph extension, which adds nodes [base, base + n)), from word [pos] to
   the end of the buffer.  [what] names the buffer in messages; children must
   lie in [0, base + n).  The node numbers in messages are the global ones. *)
let decode_nodes_exn what (b : buf) ~len ~pos:pos0 ~base ~n : Repr.graph =
  let total = base + n in
  let total64 = Int64.of_int total in
  let labels = Array.make n 0 in
  let children = Array.make n [] in
  let attr_off = Array.make (n + 1) 0 in
  let ids = ref (Array.make 64 0) and vals = ref (Array.make 64 0) in
  let n_attrs = ref 0 in
  let pos = ref pos0 in
  let need node k expected =
    if len - !pos < k then
      fail Malformed "%s: node %d: truncated: buffer ends at word %d, expected %s" what node
        len expected
  in
  for i = 0 to n - 1 do
    let t = base + i in
    (* label *)
    need t 1 "the label";
    let l = get b !pos in
    if not (is_id l) then
      fail Malformed "%s: node %d: label %Ld out of range [0, 2^62)" what t l;
    labels.(i) <- Int64.to_int l;
    incr pos;
    (* children *)
    need t 1 "the number of children";
    let nc64 = get b !pos in
    incr pos;
    if nc64 < 0L then
      fail Malformed "%s: node %d: negative number of children %Ld" what t nc64;
    if nc64 > Int64.of_int max_arity then
      fail Malformed "%s: node %d: %Ld children exceed the limit of %d" what t nc64 max_arity;
    (* the children and the n_attrs word must fit *)
    if nc64 > Int64.of_int (len - !pos - 1) then
      fail Malformed
        "%s: node %d: truncated: %Ld children announced at word %d, only %d words left" what
        t nc64 (!pos - 1) (len - !pos);
    let nc = Int64.to_int nc64 in
    let p0 = !pos in
    for j = 0 to nc - 1 do
      let c = get b (p0 + j) in
      if c < 0L || c >= total64 then
        fail Malformed "%s: node %d: child %Ld out of range [0, %d)" what t c total
    done;
    let l = ref [] in
    for j = nc - 1 downto 0 do
      l := Int64.to_int (get b (p0 + j)) :: !l
    done;
    children.(i) <- !l;
    pos := p0 + nc;
    (* attributes *)
    let na64 = get b !pos in
    incr pos;
    if na64 < 0L then
      fail Malformed "%s: node %d: negative number of attributes %Ld" what t na64;
    if na64 > Int64.of_int ((len - !pos) / 2) then
      fail Malformed
        "%s: node %d: truncated: %Ld attributes announced at word %d, only %d words left" what
        t na64 (!pos - 1) (len - !pos);
    let na = Int64.to_int na64 in
    let lo = !n_attrs in
    if lo + na > Array.length !ids then begin
      let cap = max (lo + na) (2 * Array.length !ids) in
      let ids' = Array.make cap 0 and vals' = Array.make cap 0 in
      Array.blit !ids 0 ids' 0 lo;
      Array.blit !vals 0 vals' 0 lo;
      ids := ids';
      vals := vals'
    end;
    let ids_a = !ids and vals_a = !vals in
    for j = 0 to na - 1 do
      let a = get b (!pos + (2 * j)) and v = get b (!pos + (2 * j) + 1) in
      if not (is_id a) then
        fail Malformed "%s: node %d: attribute id %Ld out of range [0, 2^62)" what t a;
      if not (is_value v) then
        fail Malformed
          "%s: node %d: attribute %Ld: value %Ld outside the range (-2^62, 2^62)" what t a v;
      ids_a.(lo + j) <- Int64.to_int a;
      vals_a.(lo + j) <- Int64.to_int v
    done;
    pos := !pos + (2 * na);
    sort_slice ids_a vals_a lo (lo + na);
    for j = lo + 1 to lo + na - 1 do
      if ids_a.(j) = ids_a.(j - 1) then
        fail Malformed "%s: node %d: duplicate attribute id %d" what t ids_a.(j)
    done;
    n_attrs := lo + na;
    attr_off.(i + 1) <- !n_attrs
  done;
  (* symbol attributes: n_sym_attrs, (symbol, attr_id, value) * n *)
  if !pos >= len then
    fail Malformed
      "%s: truncated: buffer ends at word %d, expected the number of symbol attributes" what
      len;
  let ns64 = get b !pos in
  incr pos;
  if ns64 < 0L then fail Malformed "%s: negative number of symbol attributes %Ld" what ns64;
  if ns64 > Int64.of_int ((len - !pos) / 3) then
    fail Malformed
      "%s: truncated: %Ld symbol attributes announced at word %d, only %d words left" what
      ns64 (!pos - 1) (len - !pos);
  let ns = Int64.to_int ns64 in
  let p0 = !pos in
  let triples =
    Array.init ns (fun j ->
        let s = get b (p0 + (3 * j))
        and a = get b (p0 + (3 * j) + 1)
        and v = get b (p0 + (3 * j) + 2) in
        if not (is_id s) then
          fail Malformed "%s: symbol attribute %d: symbol %Ld out of range [0, 2^62)" what j s;
        if not (is_id a) then
          fail Malformed "%s: symbol attribute %d: attribute id %Ld out of range [0, 2^62)"
            what j a;
        if not (is_value v) then
          fail Malformed "%s: symbol attribute %d: value %Ld outside the range (-2^62, 2^62)"
            what j v;
        (Int64.to_int s, Int64.to_int a, Int64.to_int v))
  in
  pos := p0 + (3 * ns);
  Array.stable_sort
    (fun (s1, a1, _) (s2, a2, _) ->
      let c = compare (s1 : int) s2 in
      if c <> 0 then c else compare (a1 : int) a2)
    triples;
  for j = 1 to ns - 1 do
    let s1, a1, _ = triples.(j - 1) and s2, a2, _ = triples.(j) in
    if s1 = s2 && a1 = a2 then
      fail Malformed "%s: duplicate symbol attribute (symbol %d, attribute id %d)" what s2 a2
  done;
  if !pos <> len then
    fail Malformed
      "%s: %d trailing words after the symbol attributes (the buffer ends at word %d of %d)"
      what (len - !pos) !pos len;
  {
    Repr.n_nodes = n;
    labels;
    children;
    attr_off;
    attr_ids = Array.sub !ids 0 !n_attrs;
    attr_vals = Array.sub !vals 0 !n_attrs;
    sym_syms = Array.map (fun (s, _, _) -> s) triples;
    sym_ids = Array.map (fun (_, a, _) -> a) triples;
    sym_vals = Array.map (fun (_, _, v) -> v) triples;
  }

(* a node takes at least 3 words (label, n_children, n_attrs) and the
   symbol-attribute count follows the nodes: a node count must fit *)
let node_count what (b : buf) ~len ~at =
  let n64 = get b at in
  let max_n = (len - at - 2) / 3 in
  if n64 < 0L then fail Malformed "%s: negative node count %Ld" what n64;
  if n64 > Int64.of_int max_n then
    fail Malformed
      "%s: truncated: %Ld nodes announced, but the %d words after the header hold at most %d"
      what n64 (len - at - 1) (max 0 max_n);
  Int64.to_int n64

let decode_graph_exn (b : buf) : Repr.graph =
  let len = check_header "graph" b magic_graph "PYPMGRPH" in
  let n = node_count "graph" b ~len ~at:2 in
  decode_nodes_exn "graph" b ~len ~pos:3 ~base:0 ~n

(* A graph extension (docs/internals/format.md, "Graph extension"): MAGIC_EXTENSION,
   VERSION, base, n_new, then node records and symbol attributes as in a
   graph.  Returns [(base, nodes)] where [nodes] describes the new nodes
   only (its [n_nodes] is n_new); [Engine.graph_extend] checks [base]
   against the loaded graph and merges. *)
let decode_extension_exn (b : buf) : int * Repr.graph =
  let len = check_header "graph extension" b magic_extension "PYPMGEXT" in
  if len < 4 then
    fail Malformed "graph extension: buffer has %d words, the header needs 4" len;
  let base64 = get b 2 in
  if not (is_id base64) then
    fail Malformed "graph extension: base node count %Ld out of range [0, 2^62)" base64;
  let base = Int64.to_int base64 in
  let n = node_count "graph extension" b ~len ~at:3 in
  if n > max_int - base then fail Malformed "graph extension: node count overflows";
  (base, decode_nodes_exn "graph extension" b ~len ~pos:4 ~base ~n)

(* --------------------------------------------------------------- patterns *)

type reader = {
  b : buf;
  mutable pos : int;
  mutable stop : int; (* end of the current body (or of the buffer) *)
  mutable index : int; (* index of the current definition *)
  n_defs : int;
}

let next r what =
  if r.pos >= r.stop then
    fail Malformed "patterns: definition %d: truncated: its words end at word %d, expected %s"
      r.index r.stop what;
  let v = get r.b r.pos in
  r.pos <- r.pos + 1;
  v

let read_id r what =
  let at = r.pos in
  let v = next r what in
  if not (is_id v) then
    fail Malformed "patterns: definition %d: word %d: %s %Ld out of range [0, 2^62)" r.index at
      what v;
  Int64.to_int v

(* A count of items of at least [per_item] words each (0: no words of
   their own), of which the words left before [stop], less [reserve], must
   hold that many; and at most [cap]. *)
let read_count r what ~per_item ~reserve ~cap =
  let at = r.pos in
  let n = next r what in
  let left = r.stop - r.pos - reserve in
  if n < 0L then fail Malformed "patterns: definition %d: word %d: negative %s %Ld" r.index at what n;
  if n > Int64.of_int cap then
    fail Malformed "patterns: definition %d: word %d: %s %Ld exceeds the limit of %d" r.index at
      what n cap;
  if per_item > 0 && n > Int64.of_int (max 0 left / per_item) then
    fail Malformed "patterns: definition %d: word %d: %s %Ld impossible with %d words left" r.index
      at what n (r.stop - r.pos);
  Int64.to_int n

let check_depth r d =
  if d > max_depth then
    fail Too_deep "patterns: definition %d: word %d: nesting deeper than %d" r.index r.pos
      max_depth

(* [d] is the depth of the term about to be read; a body is at depth 1.
   Recursion depth is bounded by [max_depth] (checked before recursing). *)
let rec read_expr r d : Matcher.expr =
  check_depth r d;
  let at = r.pos in
  let tag = next r "an expression tag" in
  match tag with
  | 1L ->
      let at = r.pos in
      let z = next r "a constant" in
      if not (is_value z) then
        fail Malformed
          "patterns: definition %d: word %d: constant %Ld outside the range (-2^62, 2^62)"
          r.index at z;
      Matcher.EConst (Int64.to_int z)
  | 2L ->
      let x = read_id r "variable" in
      let a = read_id r "attribute id" in
      Matcher.EAttr (x, a)
  | 6L ->
      let f = read_id r "operator variable" in
      let a = read_id r "attribute id" in
      Matcher.EFAttr (f, a)
  | 3L | 4L | 5L ->
      let e1 = read_expr r (d + 1) in
      let e2 = read_expr r (d + 1) in
      if tag = 3L then Matcher.EAdd (e1, e2)
      else if tag = 4L then Matcher.ESub (e1, e2)
      else Matcher.EMul (e1, e2)
  | _ ->
      fail Malformed "patterns: definition %d: word %d: unknown expression tag %Ld" r.index at tag

and read_guard r d : Matcher.guard =
  check_depth r d;
  let at = r.pos in
  let tag = next r "a guard tag" in
  match tag with
  | 1L -> Matcher.GTrue
  | 2L | 3L ->
      let e1 = read_expr r (d + 1) in
      let e2 = read_expr r (d + 1) in
      if tag = 2L then Matcher.GEq (e1, e2) else Matcher.GLt (e1, e2)
  | 4L | 5L ->
      let g1 = read_guard r (d + 1) in
      let g2 = read_guard r (d + 1) in
      if tag = 4L then Matcher.GAnd (g1, g2) else Matcher.GOr (g1, g2)
  | 6L -> Matcher.GNot (read_guard r (d + 1))
  | _ -> fail Malformed "patterns: definition %d: word %d: unknown guard tag %Ld" r.index at tag

(* [n] sub-patterns at depth [d] (every pattern takes at least 2 words) *)
and read_args r d what : Matcher.pattern list =
  let n = read_count r what ~per_item:2 ~reserve:0 ~cap:max_int in
  let acc = ref [] in
  for _ = 1 to n do
    acc := read_pattern r d :: !acc
  done;
  List.rev !acc

(* [n] variable ids; [reserve] words must remain after them *)
and read_vars r what ~reserve : int list =
  let n = read_count r ("number of " ^ what ^ "s") ~per_item:1 ~reserve ~cap:max_int in
  List.init n (fun _ -> read_id r what)

and read_pattern r d : Matcher.pattern =
  check_depth r d;
  let at = r.pos in
  let tag = next r "a pattern tag" in
  match tag with
  | 1L -> Matcher.PVar (read_id r "variable")
  | 2L ->
      let f = read_id r "symbol" in
      Matcher.PApp (f, read_args r (d + 1) "arity")
  | 3L ->
      let p1 = read_pattern r (d + 1) in
      let p2 = read_pattern r (d + 1) in
      Matcher.PAlt (p1, p2)
  | 4L ->
      let p = read_pattern r (d + 1) in
      let g = read_guard r (d + 1) in
      Matcher.PGuard (p, g)
  | 5L ->
      let x = read_id r "variable" in
      Matcher.PExists (x, read_pattern r (d + 1))
  | 6L ->
      let f = read_id r "operator variable" in
      Matcher.PExistsF (f, read_pattern r (d + 1))
  | 7L ->
      let p = read_pattern r (d + 1) in
      let p' = read_pattern r (d + 1) in
      let x = read_id r "variable" in
      Matcher.PConstr (p, p', x)
  | 8L ->
      let f = read_id r "operator variable" in
      Matcher.PFunVar (f, read_args r (d + 1) "arity")
  | 9L ->
      let at_p = r.pos in
      let p = read_id r "call target" in
      if p >= r.n_defs then
        fail Malformed
          "patterns: definition %d: word %d: call target %d out of range [0, %d) (no such definition)"
          r.index at_p p r.n_defs;
      let xs = read_vars r "call argument" ~reserve:1 in
      let fs = read_vars r "operator call argument" ~reserve:0 in
      Matcher.PCall (p, xs, fs)
  | _ -> fail Malformed "patterns: definition %d: word %d: unknown pattern tag %Ld" r.index at tag

(* a definition takes at least 7 words: n_params, n_fparams, n_pbinds,
   n_pfbinds, n_words, and a body of at least 2 words *)
let min_def_words = 7

let read_def r i : Matcher.pdef =
  r.index <- i;
  r.stop <- Bigarray.Array1.dim r.b - 1 (* the n_roots word follows the definitions *);
  let nparams = read_count r "number of parameters" ~per_item:0 ~reserve:0 ~cap:max_params in
  let nfparams =
    read_count r "number of operator parameters" ~per_item:0 ~reserve:0 ~cap:max_params
  in
  let read_binds what n =
    let cnt = read_count r ("number of " ^ what ^ " entries") ~per_item:1 ~reserve:1 ~cap:max_params in
    List.init cnt (fun _ ->
        let at = r.pos in
        let v = next r (what ^ " entry") in
        if v < 0L || v >= Int64.of_int n then
          fail Malformed
            "patterns: definition %d: word %d: %s entry %Ld is not a parameter (the definition has \
             %d)"
            i at what v n;
        Int64.to_int v)
  in
  let pbinds = read_binds "pbinds" nparams in
  let pfbinds = read_binds "pfbinds" nfparams in
  let at = r.pos in
  let nw = next r "the body's length" in
  if nw < 0L then fail Malformed "patterns: definition %d: word %d: negative body length %Ld" i at nw;
  if nw > Int64.of_int max_pattern_words then
    fail Malformed "patterns: definition %d: word %d: body of %Ld words exceeds the limit of %d" i at
      nw max_pattern_words;
  if nw > Int64.of_int (r.stop - r.pos) then
    fail Malformed "patterns: definition %d: truncated: body of %Ld words announced at word %d, only %d left"
      i nw at (r.stop - r.pos);
  r.stop <- r.pos + Int64.to_int nw;
  let body = read_pattern r 1 in
  if r.pos <> r.stop then
    fail Malformed "patterns: definition %d: %d trailing words inside its body of %Ld words (word %d)"
      i (r.stop - r.pos) nw r.pos;
  { Matcher.nparams; nfparams; body; pbinds; pfbinds }

let decode_patterns_exn (b : buf) : Repr.patterns =
  let len = check_header "patterns" b magic_patterns "PYPMPATS" in
  let nd64 = get b 2 in
  let max_nd = max 0 ((len - 4) / min_def_words) in
  if nd64 < 0L then fail Malformed "patterns: negative definition count %Ld" nd64;
  if nd64 > Int64.of_int max_defs then
    fail Malformed "patterns: %Ld definitions exceed the limit of %d" nd64 max_defs;
  if nd64 > Int64.of_int max_nd then
    fail Malformed
      "patterns: truncated: %Ld definitions announced, but the %d words after the header hold at \
       most %d"
      nd64 (len - 3) max_nd;
  let nd = Int64.to_int nd64 in
  let r = { b; pos = 3; stop = len; index = 0; n_defs = nd } in
  let defs = Array.init nd (read_def r) in
  (* roots *)
  let at = r.pos in
  if at >= len then
    fail Malformed "patterns: truncated: buffer ends at word %d, expected the number of roots" len;
  let nr64 = get b at in
  if nr64 < 0L then fail Malformed "patterns: word %d: negative root count %Ld" at nr64;
  if nr64 > Int64.of_int (len - at - 1) then
    fail Malformed "patterns: truncated: %Ld roots announced at word %d, only %d words left" nr64 at
      (len - at - 1);
  let nr = Int64.to_int nr64 in
  let roots =
    Array.init nr (fun k ->
        let v = get b (at + 1 + k) in
        if v < 0L || v >= nd64 then
          fail Malformed "patterns: root %d (word %d): definition index %Ld out of range [0, %d)" k
            (at + 1 + k) v nd;
        Int64.to_int v)
  in
  let stop = at + 1 + nr in
  if stop <> len then
    fail Malformed "patterns: %d trailing words after the roots (the set ends at word %d of %d)"
      (len - stop) stop len;
  let cost = Wf_cost.bound defs in
  if cost > Wf_cost.limit then
    fail Malformed
      "patterns: checking well-formedness would take about %.2g list steps, which exceeds the \
       limit of %.2g (bodies whose guards, exists or match constraints sit above large \
       sub-patterns)"
      cost Wf_cost.limit;
  let def_list = Array.to_list defs in
  if not (Matcher.wf_defs def_list) then fail Ill_formed "%s" (Wf_explain.explain def_list);
  { Repr.defs = def_list; def_array = defs; roots }

(* ------------------------------------------------------ multi-root spec *)

(* docs/internals/format.md, "Multi-root patterns": n_params, n_fparams, k, then k
   root indices of the loaded pattern set, then the cross-root guard in
   prefix form, then optionally one word: 0 (candidates by upward
   traversal, the default) or 1 (by the index only).  Returns (n, m, root
   indices, guard, index_only). *)
let max_multi_roots = 64

let decode_multi_exn (b : buf) ~n_roots : int * int * int list * Matcher.guard * bool =
  let len = Bigarray.Array1.dim b in
  let r = { b; pos = 0; stop = len; index = 0; n_defs = 0 } in
  let count what cap =
    let at = r.pos in
    let v = next r what in
    if v < 0L || v > Int64.of_int cap then
      fail Malformed "multi-root spec: word %d: %s %Ld outside [0, %d]" at what v cap;
    Int64.to_int v
  in
  let n = count "number of parameters" max_params in
  let m = count "number of operator parameters" max_params in
  let k = count "number of roots" max_multi_roots in
  if k = 0 then fail Malformed "multi-root spec: word 2: a multi-root pattern needs a root";
  let roots =
    List.init k (fun _ ->
        let at = r.pos in
        let v = next r "a root index" in
        if v < 0L || v >= Int64.of_int n_roots then
          fail Malformed "multi-root spec: word %d: root index %Ld out of range [0, %d)" at v
            n_roots;
        Int64.to_int v)
  in
  let g = read_guard r 1 in
  let index_only =
    if r.pos = len then false
    else begin
      let at = r.pos in
      let v = next r "the candidates mode" in
      if v <> 0L && v <> 1L then
        fail Malformed "multi-root spec: word %d: candidates mode %Ld is neither 0 nor 1" at v;
      v = 1L
    end
  in
  if r.pos <> len then
    fail Malformed "multi-root spec: %d trailing words after the candidates mode" (len - r.pos);
  (n, m, roots, g, index_only)

let decode_multi (b : buf) ~n_roots =
  match decode_multi_exn b ~n_roots with
  | v -> Ok v
  | exception Fail (kind, message) -> Error { kind; message }

let wrap f b =
  match f b with
  | v -> Ok v
  | exception Fail (kind, message) -> Error { kind; message }

let decode_graph (b : buf) : (Repr.graph, error) result = wrap decode_graph_exn b

let decode_extension (b : buf) : (int * Repr.graph, error) result =
  wrap decode_extension_exn b

let decode_patterns (b : buf) : (Repr.patterns, error) result =
  wrap decode_patterns_exn b
