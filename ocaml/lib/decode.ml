(* Validating decoder of the binary format (doc/format.md).

   Input: a Bigarray of int64 words (on the C side a zero-copy view of the
   caller's buffer, so the words are read once, straight into the OCaml
   structures).  Output: [Repr.graph] / [Matcher.pattern array], or an error
   naming the problem and where it is.

   Every field is checked before it is used: magic, version, counts against
   the words that are left, ids in [0, 2^62), values in OCaml's 63-bit int
   range, children in [0, n_nodes), distinct attribute ids per node, no
   trailing words, nesting depth <= max_depth, and well-formedness
   ([Matcher.wfb], the extracted Coq check).

   Limits beyond doc/format.md, which bound the stack the extracted
   (non-tail-recursive) matcher can use on any accepted input:
   - a graph node has at most [max_arity] children;
   - one pattern is at most [max_pattern_words] words. *)

type kind = Malformed | Ill_formed | Too_deep

type error = { kind : kind; message : string }

type buf = (int64, Bigarray.int64_elt, Bigarray.c_layout) Bigarray.Array1.t

let magic_graph = 0x485052474d505950L (* "PYPMGRPH" little-endian *)

let magic_patterns = 0x535441504d505950L (* "PYPMPATS" *)

let version = 1L

let max_depth = 10_000

let max_arity = 1 lsl 20

let max_pattern_words = 1 lsl 16

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

(* values: representable as an OCaml int, [-2^62, 2^62) *)
let is_value (v : int64) = v >= Int64.neg two62 && v < two62

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

let decode_graph_exn (b : buf) : Repr.graph =
  let len = check_header "graph" b magic_graph "PYPMGRPH" in
  let n64 = get b 2 in
  (* a node takes at least 3 words: label, n_children, n_attrs *)
  let max_n = (len - 3) / 3 in
  if n64 < 0L then fail Malformed "graph: negative node count %Ld" n64;
  if n64 > Int64.of_int max_n then
    fail Malformed
      "graph: truncated: %Ld nodes announced, but the %d words after the header hold at most %d"
      n64 (len - 3) max_n;
  let n = Int64.to_int n64 in
  let labels = Array.make n 0 in
  let children = Array.make n [] in
  let attr_off = Array.make (n + 1) 0 in
  let ids = ref (Array.make 64 0) and vals = ref (Array.make 64 0) in
  let n_attrs = ref 0 in
  let pos = ref 3 in
  let need node k what =
    if len - !pos < k then
      fail Malformed "graph: node %d: truncated: buffer ends at word %d, expected %s" node
        len what
  in
  for t = 0 to n - 1 do
    (* label *)
    need t 1 "the label";
    let l = get b !pos in
    if not (is_id l) then
      fail Malformed "graph: node %d: label %Ld out of range [0, 2^62)" t l;
    labels.(t) <- Int64.to_int l;
    incr pos;
    (* children *)
    need t 1 "the number of children";
    let nc64 = get b !pos in
    incr pos;
    if nc64 < 0L then fail Malformed "graph: node %d: negative number of children %Ld" t nc64;
    if nc64 > Int64.of_int max_arity then
      fail Malformed "graph: node %d: %Ld children exceed the limit of %d" t nc64 max_arity;
    (* the children and the n_attrs word must fit *)
    if nc64 > Int64.of_int (len - !pos - 1) then
      fail Malformed
        "graph: node %d: truncated: %Ld children announced at word %d, only %d words left"
        t nc64 (!pos - 1) (len - !pos);
    let nc = Int64.to_int nc64 in
    let p0 = !pos in
    for j = 0 to nc - 1 do
      let c = get b (p0 + j) in
      if c < 0L || c >= n64 then
        fail Malformed "graph: node %d: child %Ld out of range [0, %d)" t c n
    done;
    let l = ref [] in
    for j = nc - 1 downto 0 do
      l := Int64.to_int (get b (p0 + j)) :: !l
    done;
    children.(t) <- !l;
    pos := p0 + nc;
    (* attributes *)
    let na64 = get b !pos in
    incr pos;
    if na64 < 0L then fail Malformed "graph: node %d: negative number of attributes %Ld" t na64;
    if na64 > Int64.of_int ((len - !pos) / 2) then
      fail Malformed
        "graph: node %d: truncated: %Ld attributes announced at word %d, only %d words left"
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
        fail Malformed "graph: node %d: attribute id %Ld out of range [0, 2^62)" t a;
      if not (is_value v) then
        fail Malformed
          "graph: node %d: attribute %Ld: value %Ld outside the 63-bit range [-2^62, 2^62)" t
          a v;
      ids_a.(lo + j) <- Int64.to_int a;
      vals_a.(lo + j) <- Int64.to_int v
    done;
    pos := !pos + (2 * na);
    sort_slice ids_a vals_a lo (lo + na);
    for j = lo + 1 to lo + na - 1 do
      if ids_a.(j) = ids_a.(j - 1) then
        fail Malformed "graph: node %d: duplicate attribute id %d" t ids_a.(j)
    done;
    n_attrs := lo + na;
    attr_off.(t + 1) <- !n_attrs
  done;
  if !pos <> len then
    fail Malformed "graph: %d trailing words after the last node (the graph ends at word %d of %d)"
      (len - !pos) !pos len;
  {
    Repr.n_nodes = n;
    labels;
    children;
    attr_off;
    attr_ids = Array.sub !ids 0 !n_attrs;
    attr_vals = Array.sub !vals 0 !n_attrs;
  }

(* --------------------------------------------------------------- patterns *)

type reader = {
  b : buf;
  mutable pos : int;
  mutable stop : int; (* end of the current pattern *)
  mutable index : int; (* index of the current pattern *)
}

let next r what =
  if r.pos >= r.stop then
    fail Malformed "patterns: pattern %d: truncated: its words end at word %d, expected %s"
      r.index r.stop what;
  let v = get r.b r.pos in
  r.pos <- r.pos + 1;
  v

let read_id r what =
  let at = r.pos in
  let v = next r what in
  if not (is_id v) then
    fail Malformed "patterns: pattern %d: word %d: %s %Ld out of range [0, 2^62)" r.index at
      what v;
  Int64.to_int v

let check_depth r d =
  if d > max_depth then
    fail Too_deep "patterns: pattern %d: word %d: nesting deeper than %d" r.index r.pos max_depth

(* [d] is the depth of the term about to be read; the root is at depth 1.
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
          "patterns: pattern %d: word %d: constant %Ld outside the 63-bit range [-2^62, 2^62)"
          r.index at z;
      Matcher.EConst (Int64.to_int z)
  | 2L ->
      let x = read_id r "variable" in
      let a = read_id r "attribute id" in
      Matcher.EAttr (x, a)
  | 3L | 4L | 5L ->
      let e1 = read_expr r (d + 1) in
      let e2 = read_expr r (d + 1) in
      if tag = 3L then Matcher.EAdd (e1, e2)
      else if tag = 4L then Matcher.ESub (e1, e2)
      else Matcher.EMul (e1, e2)
  | _ -> fail Malformed "patterns: pattern %d: word %d: unknown expression tag %Ld" r.index at tag

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
  | _ -> fail Malformed "patterns: pattern %d: word %d: unknown guard tag %Ld" r.index at tag

and read_pattern r d : Matcher.pattern =
  check_depth r d;
  let at = r.pos in
  let tag = next r "a pattern tag" in
  match tag with
  | 1L -> Matcher.PVar (read_id r "variable")
  | 2L ->
      let f = read_id r "symbol" in
      let at_n = r.pos in
      let n = next r "an arity" in
      (* every argument takes at least 2 words *)
      if n < 0L || n > Int64.of_int ((r.stop - r.pos) / 2) then
        fail Malformed
          "patterns: pattern %d: word %d: arity %Ld impossible with %d words left in the pattern"
          r.index at_n n (r.stop - r.pos);
      let acc = ref [] in
      for _ = 1 to Int64.to_int n do
        acc := read_pattern r (d + 1) :: !acc
      done;
      Matcher.PApp (f, List.rev !acc)
  | 3L ->
      let p1 = read_pattern r (d + 1) in
      let p2 = read_pattern r (d + 1) in
      Matcher.PAlt (p1, p2)
  | 4L ->
      let p = read_pattern r (d + 1) in
      let g = read_guard r (d + 1) in
      Matcher.PGuard (p, g)
  | 5L | 6L | 7L | 8L | 9L ->
      fail Malformed
        "patterns: pattern %d: word %d: reserved pattern tag %Ld (exists, match constraint, \
         function variable, mu, call) is not supported"
        r.index at tag
  | _ -> fail Malformed "patterns: pattern %d: word %d: unknown pattern tag %Ld" r.index at tag

(* For the message only: the first guard (in prefix order) that reads a
   variable its guarded pattern does not bind.  The verdict itself is
   [Matcher.wfb]. *)
let rec first_unbound (p : Matcher.pattern) : int option =
  match p with
  | Matcher.PVar _ -> None
  | Matcher.PApp (_, ps) -> List.find_map first_unbound ps
  | Matcher.PAlt (p1, p2) -> (
      match first_unbound p1 with None -> first_unbound p2 | r -> r)
  | Matcher.PGuard (p0, g) -> (
      match first_unbound p0 with
      | Some _ as r -> r
      | None ->
          let bs = Matcher.binds p0 in
          List.find_opt (fun x -> not (List.mem x bs)) (Matcher.guard_vars g))

let decode_patterns_exn (b : buf) : Matcher.pattern array =
  let len = check_header "patterns" b magic_patterns "PYPMPATS" in
  let np64 = get b 2 in
  (* a pattern takes at least 3 words: n_words, 1, x *)
  let max_np = (len - 3) / 3 in
  if np64 < 0L then fail Malformed "patterns: negative pattern count %Ld" np64;
  if np64 > Int64.of_int max_np then
    fail Malformed
      "patterns: truncated: %Ld patterns announced, but the %d words after the header hold at most %d"
      np64 (len - 3) max_np;
  let np = Int64.to_int np64 in
  let r = { b; pos = 3; stop = len; index = 0 } in
  let pats =
    Array.init np (fun i ->
        r.index <- i;
        r.stop <- len;
        let at = r.pos in
        let nw = next r "the pattern's length" in
        if nw < 0L then fail Malformed "patterns: pattern %d: word %d: negative length %Ld" i at nw;
        if nw > Int64.of_int max_pattern_words then
          fail Malformed "patterns: pattern %d: word %d: %Ld words exceed the limit of %d" i at nw
            max_pattern_words;
        if nw > Int64.of_int (len - r.pos) then
          fail Malformed "patterns: pattern %d: truncated: %Ld words announced at word %d, only %d left"
            i nw at (len - r.pos);
        r.stop <- r.pos + Int64.to_int nw;
        let p = read_pattern r 1 in
        if r.pos <> r.stop then
          fail Malformed "patterns: pattern %d: %d trailing words inside its %Ld words (word %d)" i
            (r.stop - r.pos) nw r.pos;
        if not (Matcher.wfb p) then begin
          match first_unbound p with
          | Some x ->
              fail Ill_formed
                "patterns: pattern %d: a guard reads variable %d, which the guarded pattern does \
                 not bind on every alternate"
                i x
          | None -> fail Ill_formed "patterns: pattern %d: not well-formed" i
        end;
        p)
  in
  if r.pos <> len then
    fail Malformed
      "patterns: %d trailing words after the last pattern (the set ends at word %d of %d)"
      (len - r.pos) r.pos len;
  pats

let wrap f b =
  match f b with
  | v -> Ok v
  | exception Fail (kind, message) -> Error { kind; message }

let decode_graph (b : buf) : (Repr.graph, error) result = wrap decode_graph_exn b

let decode_patterns (b : buf) : (Matcher.pattern array, error) result =
  wrap decode_patterns_exn b
