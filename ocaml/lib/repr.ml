(* In-memory representation of a decoded graph (docs/internals/format.md, "Graph").

   Everything the matcher reads is O(1) or O(log a) where a is the number of
   attributes of one node:
   - node arrays may be longer than [n_nodes] (spare capacity left by
     [Engine.graph_extend]); only the first [n_nodes] entries (and
     [attr_off.(n_nodes)] attribute slots) are meaningful;
   - [labels.(t)] is the label of node t;
   - [children.(t)] is the list of children of node t, precomputed once at
     decode time so that [Matcher.graph.children] allocates nothing;
   - the attributes of node t are [attr_ids.(i), attr_vals.(i)] for
     [attr_off.(t) <= i < attr_off.(t+1)], sorted by id (distinct ids);
   - the symbol attributes (attributes of operators, e.g. the operator class)
     are the triples [sym_syms.(i), sym_ids.(i), sym_vals.(i)], sorted by
     (symbol, attribute id), distinct pairs. *)

type graph = {
  n_nodes : int;
  labels : int array;
  children : int list array;
  attr_off : int array; (* at least n_nodes + 1 entries *)
  attr_ids : int array;
  attr_vals : int array;
  sym_syms : int array;
  sym_ids : int array;
  sym_vals : int array;
}

let n_nodes g = g.n_nodes

(* Value of attribute [a] of node [t], if present.  Binary search in the
   node's sorted slice. *)
let attr g a t =
  if t < 0 || t >= g.n_nodes then None
  else begin
    let lo = ref (Array.unsafe_get g.attr_off t)
    and hi = ref (Array.unsafe_get g.attr_off (t + 1)) in
    (* invariant: the id, if present, is in [!lo, !hi) *)
    let found = ref (-1) in
    while !found < 0 && !lo < !hi do
      let mid = (!lo + !hi) lsr 1 in
      let k = g.attr_ids.(mid) in
      if k = a then found := mid
      else if k < a then lo := mid + 1
      else hi := mid
    done;
    if !found >= 0 then Some g.attr_vals.(!found) else None
  end

(* Value of attribute [a] of symbol [f], if present.  Binary search for the
   pair (f, a) in the lexicographically sorted triples. *)
let sym_attr g a f =
  let syms = g.sym_syms and ids = g.sym_ids in
  let lo = ref 0 and hi = ref (Array.length syms) in
  let found = ref (-1) in
  while !found < 0 && !lo < !hi do
    let mid = (!lo + !hi) lsr 1 in
    let s = Array.unsafe_get syms mid in
    let c = if s = f then compare (Array.unsafe_get ids mid : int) a else compare s f in
    if c = 0 then found := mid else if c < 0 then lo := mid + 1 else hi := mid
  done;
  if !found >= 0 then Some g.sym_vals.(!found) else None

(* The matcher's view of the graph.  The matcher only ever asks about the
   root (range-checked by the engine) and children of visited nodes
   (range-checked by the decoder), so the bound checks below never fire;
   they are kept as a second line of defence. *)
let to_matcher (g : graph) : Matcher.graph =
  let labels = g.labels and children = g.children in
  {
    Matcher.label = (fun t -> labels.(t));
    children = (fun t -> children.(t));
    attr = (fun a t -> attr g a t);
    sym_attr = (fun a f -> sym_attr g a f);
  }

(* A decoded pattern set (docs/internals/format.md, "Pattern set"): the definition
   table, as a list (what the matcher takes) and as an array (O(1) access to
   a root's definition), and the roots (definition indices, checked). *)
type patterns = {
  defs : Matcher.pdef list;
  def_array : Matcher.pdef array;
  roots : int array;
}
