(* Matching on decoded graphs and pattern sets, and the handle table.

   Handles are positive ints (a counter starting at 1, never reused), mapped
   to a graph, a pattern set or a result buffer.  Errors are reported by
   raising [Error (code, message)] with the codes of pypm_verified.h
   (codes.ml); the C-facing layer turns them into return codes.

   Every answer comes from an extracted function of theories/Entry.v
   (docs/guarantees/correspondence.md): a pattern set is [Matcher.load_set] of the
   decoded table and roots (the root-operator index and each root's start
   environment, computed once); [pypm_match] is [Matcher.set_match],
   [pypm_match_all] is [Matcher.set_match_all_fold] over the graph's nodes
   (the entries of [Matcher.set_match_all], handed over one by one),
   [pypm_candidates] is [Matcher.set_candidates], and the fuel is
   [Matcher.effective_fuel] of the caller's.  This module checks handles
   and ranges (errors, not answers) and copies lists into words; the rest
   (merging a graph extension, caching the users table, the users table
   and memoised node tests of [dominates]) is trusted glue, listed with the
   test covering each in docs/guarantees/correspondence.md ("Trusted glue
   in ocaml/lib/engine.ml"). *)

open Codes

exception Error of int * string

let error code fmt = Printf.ksprintf (fun s -> raise (Error (code, s))) fmt

let code_of_kind = function
  | Decode.Malformed -> e_malformed
  | Decode.Ill_formed -> e_ill_formed
  | Decode.Too_deep -> e_too_deep

(* [users]: Matcher.users_map of the graph (the users table of
   Multi.users_map, for multi-root matching), computed on first use. *)
type graph = { repr : Repr.graph; mg : Matcher.graph; users : Matcher.node list Matcher.VarMap.t Lazy.t }

let make_graph repr =
  let mg = Repr.to_matcher repr in
  { repr; mg; users = lazy (Matcher.users_map mg repr.Repr.n_nodes) }

(* A loaded pattern set: the decoded table and roots, and Matcher.load_set
   of them. *)
type pset = {
  set : Repr.patterns;
  ps : Matcher.pset;
  n_roots : int;
  rindex : Matcher.rindex Lazy.t; (* Matcher.root_index of the table, for multi-root matching *)
  kids : Matcher.kset list Lazy.t;
      (* Matcher.kid_table of the table and roots, for set_candidates_at *)
}

type entry =
  | Graph of graph
  | Patterns of pset
  | Result of Decode.buf

let kind_name = function
  | Graph _ -> "a graph"
  | Patterns _ -> "a pattern set"
  | Result _ -> "a result"

(* ints hash to themselves (no generic caml_hash on every call) *)
module Tbl = Hashtbl.Make (struct
  type t = int

  let equal = Int.equal

  let hash (h : int) = h land max_int
end)

let table : entry Tbl.t = Tbl.create 64

let next_handle = ref 1

let add e =
  let h = !next_handle in
  incr next_handle;
  Tbl.replace table h e;
  h

let find h =
  match Tbl.find_opt table h with
  | Some e -> e
  | None -> error e_bad_handle "unknown or released handle %d" h

let get_graph h =
  match find h with
  | Graph g -> g
  | e -> error e_bad_handle "handle %d is %s, expected a graph" h (kind_name e)

let get_patterns h =
  match find h with
  | Patterns p -> p
  | e -> error e_bad_handle "handle %d is %s, expected a pattern set" h (kind_name e)

let get_result h =
  match find h with
  | Result r -> r
  | e -> error e_bad_handle "handle %d is %s, expected a result" h (kind_name e)

(* ------------------------------------------------------------ loading *)

let of_decoded = function
  | Ok v -> v
  | Error { Decode.kind; message } -> raise (Error (code_of_kind kind, message))

let graph_of_buf (b : Decode.buf) : graph =
  let repr = of_decoded (Decode.decode_graph b) in
  make_graph repr

let graph_load (b : Decode.buf) : int = add (Graph (graph_of_buf b))

(* [a] with room for [need] elements, the first [used] kept: [a] itself when
   it is long enough, else a copy of at least twice the length (so that
   appending k nodes costs O(k) amortized). *)
let grow a ~used ~need fill =
  if Array.length a >= need then a
  else begin
    let a' = Array.make (max need (2 * Array.length a)) fill in
    Array.blit a 0 a' 0 used;
    a'
  end

let sym_conflict s a v1 v2 =
  error e_malformed
    "graph extension: symbol %d attribute %d is %d in the loaded graph, the extension says %d" s
    a v1 v2

(* Whether every symbol attribute of [x] is already in [g] (with the same
   value: a different one is an error, the one the merge would report
   first). The common case: an extension repeats the attributes of the
   operators its nodes use. O(|x| log |g|). *)
let sym_attrs_known (g : Repr.graph) (x : Repr.graph) : bool =
  let nx = Array.length x.Repr.sym_syms in
  let rec go j =
    j >= nx
    ||
    let s = x.Repr.sym_syms.(j) and a = x.Repr.sym_ids.(j) and v = x.Repr.sym_vals.(j) in
    match Repr.sym_attr g a s with
    | Some v1 when v1 = v -> go (j + 1)
    | Some v1 -> sym_conflict s a v1 v
    | None -> false
  in
  go 0

(* The symbol-attribute arrays of [g] and [x] merged (sorted, distinct
   pairs): [g]'s own arrays when [x] brings no new pair, so that an
   extension costs O(new nodes), not O(symbol attributes of the graph). *)
let merge_sym_attrs (g : Repr.graph) (x : Repr.graph) : int array * int array * int array =
  if sym_attrs_known g x then (g.Repr.sym_syms, g.Repr.sym_ids, g.Repr.sym_vals)
  else begin
    let ns = Array.length g.Repr.sym_syms and nx = Array.length x.Repr.sym_syms in
    let syms = Array.make (ns + nx) 0
    and ids = Array.make (ns + nx) 0
    and vals = Array.make (ns + nx) 0 in
    let i = ref 0 and j = ref 0 and o = ref 0 in
    let put s a v =
      syms.(!o) <- s;
      ids.(!o) <- a;
      vals.(!o) <- v;
      incr o
    in
    while !i < ns || !j < nx do
      if !j >= nx then begin
        put g.Repr.sym_syms.(!i) g.Repr.sym_ids.(!i) g.Repr.sym_vals.(!i);
        incr i
      end
      else if !i >= ns then begin
        put x.Repr.sym_syms.(!j) x.Repr.sym_ids.(!j) x.Repr.sym_vals.(!j);
        incr j
      end
      else begin
        let s1 = g.Repr.sym_syms.(!i) and a1 = g.Repr.sym_ids.(!i) in
        let s2 = x.Repr.sym_syms.(!j) and a2 = x.Repr.sym_ids.(!j) in
        let c = if s1 = s2 then compare (a1 : int) a2 else compare (s1 : int) s2 in
        if c < 0 then begin
          put s1 a1 g.Repr.sym_vals.(!i);
          incr i
        end
        else if c > 0 then begin
          put s2 a2 x.Repr.sym_vals.(!j);
          incr j
        end
        else begin
          let v1 = g.Repr.sym_vals.(!i) and v2 = x.Repr.sym_vals.(!j) in
          if v1 <> v2 then sym_conflict s1 a1 v1 v2;
          put s1 a1 v1;
          incr i;
          incr j
        end
      end
    done;
    (Array.sub syms 0 !o, Array.sub ids 0 !o, Array.sub vals 0 !o)
  end

(* Append the nodes of a decoded extension to [g] (the new nodes' ids are
   [g.n_nodes, ...)).  Symbol attributes are merged: a (symbol, attribute)
   pair the graph already has must come with the same value.  The node arrays
   may be longer than [n_nodes] (spare capacity) and are shared with [g]:
   only their slots past [g]'s contents are written, after every check, and
   [g] is dropped by the caller. *)
let append_nodes (g : Repr.graph) (x : Repr.graph) : Repr.graph =
  let n = g.Repr.n_nodes and k = x.Repr.n_nodes in
  let total_attrs = g.Repr.attr_off.(n) and x_attrs = x.Repr.attr_off.(k) in
  let sym_syms, sym_ids, sym_vals = merge_sym_attrs g x in
  let labels = grow g.Repr.labels ~used:n ~need:(n + k) 0 in
  Array.blit x.Repr.labels 0 labels n k;
  let children = grow g.Repr.children ~used:n ~need:(n + k) [] in
  Array.blit x.Repr.children 0 children n k;
  let attr_off = grow g.Repr.attr_off ~used:(n + 1) ~need:(n + k + 1) 0 in
  for i = 1 to k do
    attr_off.(n + i) <- total_attrs + x.Repr.attr_off.(i)
  done;
  let need = total_attrs + x_attrs in
  let attr_ids = grow g.Repr.attr_ids ~used:total_attrs ~need 0 in
  let attr_vals = grow g.Repr.attr_vals ~used:total_attrs ~need 0 in
  Array.blit x.Repr.attr_ids 0 attr_ids total_attrs x_attrs;
  Array.blit x.Repr.attr_vals 0 attr_vals total_attrs x_attrs;
  {
    Repr.n_nodes = n + k;
    labels;
    children;
    attr_off;
    attr_ids;
    attr_vals;
    sym_syms;
    sym_ids;
    sym_vals;
  }

(* Extend the graph of handle [h] in place with the nodes of [b].  Nodes are
   only added (a node's label, children and attributes never change), so a
   match result obtained before stays valid.  Nothing changes on error. *)
let graph_extend h (b : Decode.buf) : unit =
  let g = get_graph h in
  let base, x = of_decoded (Decode.decode_extension b) in
  let n = g.repr.Repr.n_nodes in
  if base <> n then
    error e_out_of_range "graph extension starts at node %d, but graph %d has %d nodes" base h n;
  let repr = append_nodes g.repr x in
  Tbl.replace table h (Graph (make_graph repr))

let pset_of_buf (b : Decode.buf) : pset =
  let set = of_decoded (Decode.decode_patterns b) in
  match Matcher.load_set set.Repr.defs (Array.to_list set.Repr.roots) with
  | Some ps ->
      {
        set;
        ps;
        n_roots = Array.length set.Repr.roots;
        rindex = lazy (Matcher.root_index set.Repr.defs);
        kids = lazy (Matcher.kid_table set.Repr.defs (Array.to_list set.Repr.roots));
      }
  | None -> error e_malformed "patterns: a root names no definition"
  (* unreachable: the decoder checked the roots (Entry.load_set_some) *)

let patterns_load (b : Decode.buf) : int = add (Patterns (pset_of_buf b))

let handle_size h =
  match find h with
  | Graph g -> g.repr.Repr.n_nodes
  | Patterns p -> p.n_roots
  | Result r -> Bigarray.Array1.dim r

let release h =
  ignore (find h);
  Tbl.remove table h

(* ------------------------------------------------------------ matching *)

(* status, term bindings and operator bindings of an answer *)
let of_answer = function
  | Matcher.RMatch (binds, fbinds) -> (status_match, binds, fbinds)
  | Matcher.RNoMatch -> (status_no_match, [], [])
  | Matcher.ROutOfFuel -> (status_out_of_fuel, [], [])

let match_one ~graph ~patterns ~index ~root ~fuel =
  let g = get_graph graph in
  let ps = get_patterns patterns in
  let nr = ps.n_roots in
  if index < 0 || index >= nr then error e_out_of_range "pattern index %d out of range [0, %d)" index nr;
  if root < 0 || root >= g.repr.Repr.n_nodes then
    error e_out_of_range "root node %d out of range [0, %d)" root g.repr.Repr.n_nodes;
  of_answer (Matcher.set_match g.mg ps.ps (Matcher.effective_fuel (max 0 fuel)) index root)

(* The roots (indices, increasing) whose root-operator index admits
   [symbol] with attributes [attrs] ((attribute, value) pairs, checked by
   Decode.sym_attr_pairs): the others answer no match at any node labelled
   [symbol] in a graph giving it those attributes. *)
let candidates ~patterns ~symbol ~(attrs : (int * int) list) : int list =
  let ps = get_patterns patterns in
  if symbol < 0 then error e_out_of_range "symbol %d out of range [0, 2^62)" symbol;
  Matcher.set_candidates ps.ps symbol (fun a -> List.assoc_opt a attrs)

(* The roots (indices, increasing) whose root-operator index admits
   [symbol] with [attrs] and whose children's index admits [kids] (each
   child's operator and attributes): Entry.set_candidates_at with the set's
   Matcher.kid_table (computed at the first call); the others have no match
   at a node with that operator and those arguments' operators
   (Entry.candidates_at_sound). *)
let candidates_at ~patterns ~symbol ~(attrs : (int * int) list)
    ~(kids : (int * (int * int) list) list) : int list =
  let ps = get_patterns patterns in
  if symbol < 0 then error e_out_of_range "symbol %d out of range [0, 2^62)" symbol;
  Matcher.set_candidates_at ps.ps (Lazy.force ps.kids) symbol
    (fun a -> List.assoc_opt a attrs)
    (List.map (fun (f, at) -> (f, fun a -> List.assoc_opt a at)) kids)

(* growable int buffer *)
type ibuf = { mutable a : int array; mutable n : int }

let push b v =
  if b.n = Array.length b.a then begin
    let a' = Array.make (2 * Array.length b.a) 0 in
    Array.blit b.a 0 a' 0 b.n;
    b.a <- a'
  end;
  Array.unsafe_set b.a b.n v;
  b.n <- b.n + 1

(* the buffer's words as the int64 array a result handle holds *)
let to_int64s b =
  let out = Bigarray.Array1.create Bigarray.int64 Bigarray.c_layout b.n in
  for i = 0 to b.n - 1 do
    Bigarray.Array1.unsafe_set out i (Int64.of_int (Array.unsafe_get b.a i))
  done;
  out

let push_pairs b l =
  push b (List.length l);
  List.iter
    (fun (x, t) ->
      push b x;
      push b t)
    l

(* n_entries, then entries (pattern_index, root, status, n_bindings, pairs,
   n_fbindings, pairs): the entries Matcher.set_match_all_fold hands over,
   in its order (that of Matcher.set_match_all), each written at once. *)
let match_all_words ~graph ~patterns ~fuel : Decode.buf =
  let g = get_graph graph in
  let ps = get_patterns patterns in
  let b = { a = Array.make 1024 0; n = 0 } in
  push b 0;
  let count =
    Matcher.set_match_all_fold g.mg ps.ps (Matcher.effective_fuel (max 0 fuel)) g.repr.Repr.n_nodes
      (fun count i root a ->
        let status, binds, fbinds = of_answer a in
        push b i;
        push b root;
        push b status;
        push_pairs b binds;
        push_pairs b fbinds;
        count + 1)
      0
  in
  b.a.(0) <- count;
  to_int64s b

let match_all ~graph ~patterns ~fuel : int * int =
  let r = match_all_words ~graph ~patterns ~fuel in
  (add (Result r), Bigarray.Array1.dim r)

let result h = get_result h

(* ------------------------------------------------------- multi-root *)

(* A multi-root pattern (docs/internals/format.md, "Multi-root patterns") over a loaded
   pattern set: the roots are root indices of the set, mapped to their
   definitions; checked with the extracted [Matcher.wf_multi] and
   [Matcher.mp_scoped] (the premises of [Multi.match_multi_fail_sound_any]). *)

(* Why [Matcher.mp_scoped] fails: the first root whose definition has more
   parameters than the spec's shared variables.  For the message only. *)
let explain_scope (defs : Matcher.pdef list) (mp : Matcher.mpat) : string =
  let bad =
    List.find_map
      (fun (i, r) ->
        match List.nth_opt defs r with
        | Some d when d.Matcher.nparams > mp.Matcher.mp_n || d.Matcher.nfparams > mp.Matcher.mp_m
          ->
            Some (i, r, d)
        | _ -> None)
      (List.mapi (fun i r -> (i, r)) mp.Matcher.mp_roots)
  in
  match bad with
  | Some (i, r, d) ->
      Printf.sprintf
        "multi-root spec: ill-formed: root %d (definition %d) has %d term and %d operator \
         parameters, more than the spec's %d term and %d operator variables (a root reads \
         the shared variables as its parameters)"
        i r d.Matcher.nparams d.Matcher.nfparams mp.Matcher.mp_n mp.Matcher.mp_m
  | None -> "multi-root spec: ill-formed (a root has more parameters than the shared variables)"

let multi_of ps (b : Decode.buf) : Matcher.mpat * bool =
  let n, m, roots, g, index_only = of_decoded (Decode.decode_multi b ~n_roots:ps.n_roots) in
  let defs = List.map (fun i -> ps.set.Repr.roots.(i)) roots in
  let mp = { Matcher.mp_n = n; mp_m = m; mp_roots = defs; mp_guard = g } in
  (match Matcher.bodies ps.set.Repr.defs defs with
  | Some bodies ->
      if not (Matcher.wf_multi ps.set.Repr.defs bodies g) then
        error e_ill_formed
          "multi-root spec: ill-formed (a root is not well formed, or the cross-root guard reads a variable no root binds)";
      if not (Matcher.mp_scoped ps.set.Repr.defs mp) then
        error e_ill_formed "%s" (explain_scope ps.set.Repr.defs mp)
  | None -> error e_malformed "multi-root spec: a root names no definition");
  (mp, index_only)

let push_manswer b root = function
  | Matcher.MMatch (ts, binds, fbinds) ->
      push b root;
      push b status_match;
      push b (List.length ts);
      List.iter (push b) ts;
      push_pairs b binds;
      push_pairs b fbinds
  | Matcher.MNoMatch ->
      push b root;
      push b status_no_match;
      push b 0;
      push b 0;
      push b 0
  | Matcher.MOutOfFuel ->
      push b root;
      push b status_out_of_fuel;
      push b 0;
      push b 0;
      push b 0

(* [root >= 0]: the one entry of Multi.match_multi at [root] (computed as
   Matcher.match_multi_u with the graph's cached users table, which is
   Matcher.users_map of the graph: Matcher.match_multi by definition);
   [root < 0]: Multi.match_all_multi (Matcher.match_all_multi_u likewise).
   With the spec's index-only flag: Multi.match_multi_idx /
   match_all_multi_idx (the candidates by the index alone). *)
let match_multi ~graph ~patterns ~(spec : Decode.buf) ~root ~fuel : int * int =
  let g = get_graph graph in
  let ps = get_patterns patterns in
  let mp, index_only = multi_of ps spec in
  let defs = ps.set.Repr.defs in
  let n = g.repr.Repr.n_nodes in
  let fuel = Matcher.effective_fuel (max 0 fuel) in
  let b = { a = Array.make 64 0; n = 0 } in
  if root >= 0 then begin
    if root >= n then error e_out_of_range "root node %d out of range [0, %d)" root n;
    push b 1;
    push_manswer b root
      (if index_only then Matcher.match_multi_idx g.mg defs fuel n mp root
       else Matcher.match_multi_u g.mg defs (Lazy.force g.users) fuel n mp root)
  end
  else begin
    let entries =
      if index_only then Matcher.match_all_multi_idx g.mg defs fuel n mp
      else Matcher.match_all_multi_u g.mg defs (Lazy.force g.users) fuel n mp
    in
    push b (List.length entries);
    List.iter (fun (t, a) -> push_manswer b t a) entries
  end;
  (add (Result (to_int64s b)), b.n)

(* ------------------------------------------------------- dominates *)

exception Dom_out_of_fuel of int

(* Relay's dominates(P, I, C) (Dominates.v; docs/internals/format.md, "Dominator
   patterns"). [spec]: parent, path and child root indices of the set, the
   node count n (that of the graph), then n flag words (bit 0: a constant
   leaf, bit 1: an output, bit 2: live). The per-node answers of P, I and C
   are Matcher.set_match (skipped where Matcher.set_candidates says no),
   memoized over the call; the users table is built
   here from the children of live nodes (the extracted code checks it:
   Dominates.users_okb); the decision, the parent and the region are the
   extracted Matcher.dom_result (one node) or Matcher.dom_all (every node:
   acyclicity and the table checked once). A pattern out of fuel at a node
   the check needs gives status out of fuel for that root (one node), or
   for the first such root (every node: the rest are not reported).
   Result: n_entries, then per entry root, status, parent (-1 if none), k,
   region*k (root >= 0: one entry; root < 0: every node in increasing
   order, the entries with status match or out of fuel). *)
let dominates ~graph ~patterns ~(spec : Decode.buf) ~root ~fuel : int * int =
  let g = get_graph graph in
  let ps = get_patterns patterns in
  let n = g.repr.Repr.n_nodes in
  let len = Bigarray.Array1.dim spec in
  let word i = Bigarray.Array1.get spec i in
  if len < 4 then error e_malformed "dominates spec: %d words, at least 4 needed" len;
  let index what i =
    let v = word i in
    if v < 0L || v >= Int64.of_int ps.n_roots then
      error e_out_of_range "dominates spec: %s pattern index %Ld out of range [0, %d)" what v
        ps.n_roots;
    Int64.to_int v
  in
  let ip = index "parent" 0 and ii = index "path" 1 and ic = index "child" 2 in
  if word 3 <> Int64.of_int n then
    error e_malformed "dominates spec: node count %Ld, the graph has %d nodes" (word 3) n;
  if len <> 4 + n then
    error e_malformed "dominates spec: %d words, expected 4 + %d node flags" len n;
  let flags =
    Array.init n (fun t ->
        let v = word (4 + t) in
        if v < 0L || v > 7L then
          error e_malformed "dominates spec: flags of node %d are %Ld (bits 0..2 only)" t v;
        Int64.to_int v)
  in
  if root >= n then error e_out_of_range "root node %d out of range [0, %d)" root n;
  let flag bit t = t >= 0 && t < n && flags.(t) land bit <> 0 in
  let fuel = Matcher.effective_fuel (max 0 fuel) in
  (* per operator, the roots its index admits (Entry.set_candidates: the
     others answer no match without running, set_candidates_correct) *)
  let cands = Hashtbl.create 16 in
  let admits idx t =
    let f = g.mg.Matcher.label t in
    let l =
      match Hashtbl.find_opt cands f with
      | Some l -> l
      | None ->
          let l = Matcher.set_candidates ps.ps f (fun a -> g.mg.Matcher.sym_attr a f) in
          Hashtbl.replace cands f l;
          l
    in
    List.mem idx l
  in
  let test idx =
    let memo = Hashtbl.create 64 in
    fun t ->
      match Hashtbl.find_opt memo t with
      | Some b -> b
      | None ->
          let b =
            if not (admits idx t) then false
            else
            match Matcher.set_match g.mg ps.ps fuel idx t with
            | Matcher.RMatch _ -> true
            | Matcher.RNoMatch -> false
            | Matcher.ROutOfFuel -> raise (Dom_out_of_fuel t)
          in
          Hashtbl.replace memo t b;
          b
  in
  let is_p = test ip and is_i = test ii and is_c = test ic in
  let ch = g.mg.Matcher.children in
  (* the users table: the live users of each node, increasing *)
  let users = Array.make n [] in
  for u = n - 1 downto 0 do
    if flag 4 u then
      List.iter
        (fun c -> if c >= 0 && c < n && not (List.mem u users.(c)) then users.(c) <- u :: users.(c))
        (ch u)
  done;
  let uf x = if x >= 0 && x < n then users.(x) else [] in
  let b = { a = Array.make 64 0; n = 0 } in
  let entry t status parent region =
    push b t;
    push b status;
    push b parent;
    push b (List.length region);
    List.iter (push b) region
  in
  let answer t ok parent region =
    match (ok, parent) with
    | true, Some p -> entry t status_match p (List.sort_uniq compare region)
    | _ -> entry t status_no_match (-1) []
  in
  if root >= 0 then begin
    push b 1;
    match
      if is_c root then
        Some (Matcher.dom_result n ch (flag 1) (flag 4) (flag 2) is_p is_i uf root)
      else None
    with
    | exception Dom_out_of_fuel _ -> entry root status_out_of_fuel (-1) []
    | None -> entry root status_no_match (-1) []
    | Some ((ok, parent), region) -> answer root ok parent region
  end
  else begin
    push b 0;
    let count = ref 0 in
    (match Matcher.dom_all n ch (flag 1) (flag 4) (flag 2) is_p is_i is_c uf with
    | exception Dom_out_of_fuel t ->
        entry t status_out_of_fuel (-1) [];
        count := 1
    | None ->
        (* not topological (every answer is no), or the table was rejected (a bug here) *)
        if Matcher.topob n ch then
          error e_internal "dominates: the users table failed Dominates.users_okb"
    | Some l ->
        List.iter
          (fun (((t, ok), parent), region) ->
            if ok then begin
              answer t ok parent region;
              incr count
            end)
          l);
    b.a.(0) <- !count
  end;
  (add (Result (to_int64s b)), b.n)
