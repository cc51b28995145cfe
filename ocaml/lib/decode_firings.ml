(* The reader of a firing-certificate buffer (docs/internals/format.md,
   "Firing certificates"): a rewrite-validation buffer (Decode_rewrite),
   then the labels' operators, the before nodes' images in the matcher's
   graph and one certificate per firing, decoded into the arguments of the
   extracted checker [Matcher.validate_firings] (Certify.v).

   As for Decode_rewrite: every count is checked against the words left,
   every word against its range, no word may trail, and [decode] never
   raises.  Templates are bounded up front so that checking one can neither
   exhaust the stack nor take exponential time: at most [max_template]
   nodes, each argument naming a variable or an earlier node, and the tree
   they unfold to (shared nodes counted each time they are used) at most
   [max_template_size] nodes. *)

open Decode_rewrite

type buf = Decode.buf

type t = {
  pass : Decode_rewrite.t;
  sym : int option list;
  gm : int option list;
  certs : Matcher.cert list;
}

let max_template = Decode.max_depth

let max_template_size = 1_000_000

let read_template (r : reader) (f : int) : Matcher.tmpl =
  let what = Printf.sprintf "firing %d template" f in
  let n = count r (fun () -> what ^ " node count") 2 in
  if n > max_template then fail "%s: %d nodes, at most %d" what n max_template;
  let nodes = Array.make n (Matcher.TVar 0) in
  let sizes = Array.make n 0 in
  (* an argument: tag 0 = variable, tag 1 = an earlier template node *)
  let arg j =
    let at = r.pos in
    let tag = word r (fun () -> what ^ " argument tag") in
    let v = id r (fun () -> what ^ " argument") in
    if Int64.equal tag 0L then (Matcher.TVar v, 1)
    else if Int64.equal tag 1L then begin
      if v >= j then
        fail "word %d (%s): node %d refers to node %d, not an earlier one" at what j v;
      (nodes.(v), sizes.(v))
    end
    else fail "word %d (%s argument tag): %Ld is neither 0 (variable) nor 1 (node)" at what tag
  in
  for j = 0 to n - 1 do
    let l = id r (fun () -> Printf.sprintf "%s node %d label" what j) in
    let k = count r (fun () -> Printf.sprintf "%s node %d arity" what j) 2 in
    if k > max_template then fail "%s node %d: arity %d, at most %d" what j k max_template;
    let args = list k (fun _ -> arg j) in
    let size = List.fold_left (fun s (_, z) -> min max_template_size (s + z)) 1 args in
    if size >= max_template_size then
      fail "%s node %d: the template unfolds to %d nodes or more" what j max_template_size;
    nodes.(j) <- Matcher.TApp (l, List.map fst args);
    sizes.(j) <- size
  done;
  fst (arg n)

let read_cert (r : reader) (f : int) : Matcher.cert =
  let at = r.pos in
  let kind = word r (fun () -> Printf.sprintf "firing %d certificate kind" f) in
  if Int64.equal kind 1L then Matcher.CMerge
  else if Int64.equal kind 0L then begin
    let k = id r (fun () -> Printf.sprintf "firing %d pattern index" f) in
    let ns = count r (fun () -> Printf.sprintf "firing %d substitution size" f) 2 in
    let sb =
      list ns (fun _ ->
          let x = id r (fun () -> Printf.sprintf "firing %d substitution variable" f) in
          let v = id r (fun () -> Printf.sprintf "firing %d substitution node" f) in
          (x, v))
    in
    let t = read_template r f in
    Matcher.CRule (k, sb, t)
  end
  else fail "word %d (firing %d certificate kind): %Ld is neither 0 (rule) nor 1 (merge)" at f kind

let decode_exn (b : buf) : t =
  let r = reader b in
  let pass = read_pass r in
  let n_before = List.length pass.before.Matcher.tnodes in
  let n_labels = count r (fun () -> "label count") 1 in
  let sym = list n_labels (fun l -> opt_id r (fun () -> Printf.sprintf "operator of label %d" l)) in
  if left r < n_before then
    fail "truncated: the images need %d words (one per before node), %d left" n_before (left r);
  let gm = list n_before (fun i -> opt_id r (fun () -> Printf.sprintf "image of before node %d" i)) in
  let certs = list (List.length pass.firings) (fun f -> read_cert r f) in
  finish r;
  { pass; sym; gm; certs }

let decode (b : buf) : (t, string) result =
  match decode_exn b with
  | t -> Ok t
  | exception Fail msg -> Error ("firing-certificate buffer: " ^ msg)
  | exception Stack_overflow -> Error "firing-certificate buffer: stack overflow while decoding"
  | exception Out_of_memory -> Error "firing-certificate buffer: out of memory while decoding"

(* The verdict against the matcher's graph [g] ([n] nodes) and the loaded
   pattern set [ps]: 0 (accepted, where = -1) or a reason code and where. *)
let verdict ~(g : Matcher.graph) ~(n : int) ~(ps : Matcher.pset) ~(fuel : int) (t : t) : int * int =
  let p = t.pass in
  let fi, mi, us = Decode_rewrite.hints p in
  (* the hint of [bad_agree]: the (first) before node [i] whose image each
     node of [g] is, as [i + 1]; trusted for nothing, as [hints]'s *)
  let gi = Array.make (max n 0) 0 in
  List.iteri (fun i o -> match o with
      | Some t when t >= 0 && t < n && gi.(t) = 0 -> gi.(t) <- i + 1
      | _ -> ()) t.gm;
  match
    Matcher.validate_firings g n ps fuel t.sym t.gm p.before p.after p.firings p.map t.certs
      fi mi us gi
  with
  | None -> (0, -1)
  | Some (code, Some w) -> (code, w)
  | Some (code, None) -> (code, -1)
