(* The reader of a rewrite-validation buffer (docs/internals/format.md,
   "Rewrite validation"): two term graphs (before and after a driver's pass),
   the firings and the after -> before node map, decoded into the arguments
   of the extracted validator [Matcher.validate] (Rewrite.v).

   Every count is checked against the words left before anything is read,
   every label, arity, index and map word against its range ([0, 2^62), or
   -1 for a new node in the map), and no word may trail.  What the words
   mean (arguments before their node, outputs and firings in range, the map
   a renaming) is the validator's to decide: it answers with a reason code,
   not a decoding error.  [decode] never raises. *)

type buf = Decode.buf

type t = {
  before : Matcher.tgraph;
  after : Matcher.tgraph;
  firings : (int * int) list;
  map : int option list;
}

exception Fail of string

let fail fmt = Printf.ksprintf (fun s -> raise (Fail s)) fmt

(* A cursor over a buffer: every read checks the words left. *)
type reader = { b : buf; len : int; mutable pos : int }

let reader (b : buf) = { b; len = Bigarray.Array1.dim b; pos = 0 }

let left r = r.len - r.pos

(* [what ()] names the word being read; it is built only for a message *)
let word r what =
  if left r < 1 then fail "truncated: buffer ends at word %d, expected %s" r.len (what ());
  let v = Bigarray.Array1.unsafe_get r.b r.pos in
  r.pos <- r.pos + 1;
  v

let id r what =
  let at = r.pos in
  let v = word r what in
  if not (Decode.is_id v) then fail "word %d (%s): %Ld out of range [0, 2^62)" at (what ()) v;
  Int64.to_int v

(* a count of items of [per] words each, at most the words left *)
let count r what per =
  let at = r.pos in
  let v = word r what in
  if v < 0L then fail "word %d: negative %s %Ld" at (what ()) v;
  if v > Int64.of_int (left r / per) then
    fail "word %d: %s %Ld exceeds the %d words left" at (what ()) v (left r);
  Int64.to_int v

(* an index or -1 (none) *)
let opt_id r what =
  let at = r.pos in
  let v = word r what in
  if Int64.equal v (-1L) then None
  else if Decode.is_id v then Some (Int64.to_int v)
  else fail "word %d (%s): %Ld is neither -1 nor in [0, 2^62)" at (what ()) v

(* [n] items read in order, as a list *)
let list n item =
  let acc = ref [] in
  for i = 0 to n - 1 do
    acc := item i :: !acc
  done;
  List.rev !acc

(* The pass, from the reader's position; leaves the reader after the map. *)
let read_pass (r : reader) : t =
  let graph name =
    let n = count r (fun () -> name ^ " node count") 2 in
    let nodes =
      list n (fun i ->
          let what s () = Printf.sprintf "%s node %d %s" name i s in
          let l = id r (what "label") in
          let k = count r (what "arity") 1 in
          let args = list k (fun _ -> id r (what "argument")) in
          { Matcher.tlabel = l; targs = args })
    in
    let m = count r (fun () -> name ^ " output count") 1 in
    let outs = list m (fun _ -> id r (fun () -> name ^ " output")) in
    ({ Matcher.tnodes = nodes; touts = outs }, n)
  in
  let before, _ = graph "before" in
  let after, n_after = graph "after" in
  let nf = count r (fun () -> "firing count") 2 in
  let firings =
    list nf (fun _ ->
        let root = id r (fun () -> "firing root") in
        let p = id r (fun () -> "firing replacement") in
        (root, p))
  in
  if left r < n_after then
    fail "truncated: the map needs %d words (one per after node), %d left" n_after (left r);
  let map = list n_after (fun h -> opt_id r (fun () -> Printf.sprintf "map entry of after node %d" h)) in
  { before; after; firings; map }

let finish (r : reader) =
  if left r <> 0 then fail "%d trailing words (word %d on)" (left r) r.pos

let decode_exn (b : buf) : t =
  let r = reader b in
  let t = read_pass r in
  finish r;
  t

let decode (b : buf) : (t, string) result =
  match decode_exn b with
  | t -> Ok t
  | exception Fail msg -> Error ("rewrite-validation buffer: " ^ msg)
  | exception Stack_overflow -> Error "rewrite-validation buffer: stack overflow while decoding"
  | exception Out_of_memory -> Error "rewrite-validation buffer: out of memory while decoding"

(* The validator's hints (Rewrite.v, [validate]), as the arrays its
   tables are: [fi], the firing [f] at each before node as [f + 1] (the
   first, so that a second firing there is the one the validator rejects;
   0: none); [mi], the after node [h] mapped to each before node as
   [h + 1] (the first, so that a second one is the map entry the validator
   rejects; 0: none); [us], for each after node reached from the outputs, a
   later reached node that reads it or its output position [na + j], and
   for any other node a word no check accepts (so the first such node is
   the one the validator names: the first one no output reaches). Trusted
   for nothing: the proved checker checks every hint it reads, and a wrong
   one rejects. *)
let hints (t : t) : int array * int array * int array =
  let nodes = Array.of_list t.after.Matcher.tnodes in
  let na = Array.length nodes and nb = List.length t.before.Matcher.tnodes in
  let fi = Array.make nb 0 in
  List.iteri (fun f (r, _) -> if r >= 0 && r < nb && fi.(r) = 0 then fi.(r) <- f + 1) t.firings;
  let mi = Array.make nb 0 in
  List.iteri (fun h o -> match o with
      | Some g when g >= 0 && g < nb && mi.(g) = 0 -> mi.(g) <- h + 1
      | _ -> ()) t.map;
  let live = Bytes.make na '\000' in
  List.iter (fun o -> if o >= 0 && o < na then Bytes.set live o '\001') t.after.Matcher.touts;
  for u = na - 1 downto 0 do
    if Bytes.get live u = '\001' then
      List.iter (fun a -> if a >= 0 && a < u then Bytes.set live a '\001') nodes.(u).Matcher.targs
  done;
  let outs = t.after.Matcher.touts in
  let us = Array.make na (na + List.length outs) in
  Array.iteri (fun u n ->
      if Bytes.get live u = '\001' then
        List.iter (fun a -> if a >= 0 && a < u then us.(a) <- u) n.Matcher.targs) nodes;
  List.iteri (fun j o -> if o >= 0 && o < na then us.(o) <- na + j) outs;
  (fi, mi, us)

(* The verdict: 0 (accepted, where = -1) or a reason code and where. *)
let verdict (t : t) : int * int =
  let fi, mi, us = hints t in
  match Matcher.validate t.before t.after t.firings t.map fi mi us with
  | None -> (0, -1)
  | Some (code, Some w) -> (code, w)
  | Some (code, None) -> (code, -1)
