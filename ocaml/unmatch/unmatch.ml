(* unmatch: the extracted matcher with its case analyses on [nat], [positive]
   and [Z] written out.

   ExtrOcamlNatInt and ExtrOcamlZInt realize a [match] on these types (all
   OCaml [int]s) by a case function applied to one continuation per
   constructor and the scrutinee:

     (fun fO fS n -> if n=0 then fO () else fS (n-1)) (fun _ -> e0) (fun k -> e1) x

   Without flambda, ocamlopt allocates each continuation as a closure, at
   every step of every recursion on a number (the interpreter's fuel, the
   tries' keys: 14 words per step of a lookup).  This tool rewrites each
   such application into the code it means:

     let s = x in if s=0 then (let _ = () in e0) else (let k = s-1 in e1)

   that is, it binds the scrutinee to a fresh name, then replaces each call
   [f a] of a continuation [f = fun p -> e] in the case function's body by
   [let p = a in e].  Both steps are beta-reductions of values (the
   continuations are functions; OCaml evaluates the scrutinee first in both
   forms), so the rewritten program computes what the extracted one does.
   Only an application of exactly this shape is rewritten: the function
   part a chain of [fun] over plain variables whose body calls each
   continuation parameter only as [f a] and never names it otherwise, the
   arguments as many as the parameters, every one but the last a
   one-parameter [fun], the body binding no name (nothing in it can
   capture a name of an inlined continuation).  Anything else is printed
   as it was (Pprintast).

   Usage: unmatch IN.ml > OUT.ml *)

open Parsetree

let fresh =
  let k = ref 0 in
  fun () ->
    incr k;
    Printf.sprintf "pypm__case%d" !k

(* [fun x1 -> ... fun xk -> body] over plain variables: [([x1..xk], body)] *)
let rec params e =
  match e.pexp_desc with
  | Pexp_fun (Asttypes.Nolabel, None, { ppat_desc = Ppat_var v; _ }, body) ->
      let vs, b = params body in
      (v.txt :: vs, b)
  | _ -> ([], e)

(* [f a], a plain name called with one unlabelled argument: [Some (f, a)] *)
let call1 e =
  match e.pexp_desc with
  | Pexp_apply ({ pexp_desc = Pexp_ident { txt = Longident.Lident f; _ }; _ },
                [ (Asttypes.Nolabel, a) ]) ->
      Some (f, a)
  | _ -> None

(* the names [e] mentions as identifiers, and whether each is only ever
   called with one argument *)
let uses e =
  let seen = Hashtbl.create 8 in
  let note name ok =
    let was = try Hashtbl.find seen name with Not_found -> true in
    Hashtbl.replace seen name (was && ok)
  in
  let it =
    {
      Ast_iterator.default_iterator with
      expr =
        (fun self e ->
          match (call1 e, e.pexp_desc) with
          | Some (f, a), _ ->
              note f true;
              self.expr self a
          | None, Pexp_ident { txt = Longident.Lident f; _ } -> note f false
          | None, _ -> Ast_iterator.default_iterator.expr self e);
    }
  in
  it.expr it e;
  seen

(* whether [e] binds a name anywhere (a pattern: let, fun, match, ...); a
   case function's body that binds none cannot capture a name of a
   continuation inlined into it *)
let binds e =
  let found = ref false in
  let it =
    { Ast_iterator.default_iterator with pat = (fun _ _ -> found := true) }
  in
  it.expr it e;
  !found

(* rename the scrutinee parameter [v] to [s] in the case function's body *)
let rename v s body =
  let m =
    {
      Ast_mapper.default_mapper with
      expr =
        (fun self e ->
          match e.pexp_desc with
          | Pexp_ident ({ txt = Longident.Lident x; _ } as id) when x = v ->
              { e with pexp_desc = Pexp_ident { id with txt = Longident.Lident s } }
          | _ -> Ast_mapper.default_mapper.expr self e);
    }
  in
  m.expr m body

let rewritten = ref 0

let expr self e =
  match e.pexp_desc with
  | Pexp_apply (f, args) -> (
      let vs, body = params f in
      let n = List.length vs in
      let plain = List.for_all (fun (l, _) -> l = Asttypes.Nolabel) args in
      if n < 2 || List.length args <> n || not plain then Ast_mapper.default_mapper.expr self e
      else
        let conts = List.filteri (fun i _ -> i < n - 1) (List.map snd args) in
        let scrut = snd (List.nth args (n - 1)) in
        let kvs = List.filteri (fun i _ -> i < n - 1) vs in
        let scrut_var = List.nth vs (n - 1) in
        let lam c =
          match c.pexp_desc with
          | Pexp_fun (Asttypes.Nolabel, None, p, b) -> Some (p, b)
          | _ -> None
        in
        let lams = List.filter_map lam conts in
        let u = uses body in
        let only_called k = try Hashtbl.find u k with Not_found -> true in
        let distinct = List.length (List.sort_uniq compare vs) = n in
        if List.length lams <> n - 1 || not (List.for_all only_called kvs)
           || not distinct || binds body
        then Ast_mapper.default_mapper.expr self e
        else begin
          incr rewritten;
          (* the continuations' bodies, rewritten themselves first *)
          let table =
            List.map2 (fun k (p, b) -> (k, (p, self.Ast_mapper.expr self b))) kvs lams
          in
          let s = fresh () in
          let body = rename scrut_var s body in
          let inline =
            {
              Ast_mapper.default_mapper with
              expr =
                (fun m e ->
                  match call1 e with
                  | Some (k, a) when List.mem_assoc k table ->
                      let p, b = List.assoc k table in
                      let a = m.Ast_mapper.expr m a in
                      Ast_helper.Exp.let_ Asttypes.Nonrecursive
                        [ Ast_helper.Vb.mk p a ] b
                  | _ -> Ast_mapper.default_mapper.expr m e);
            }
          in
          let body = inline.expr inline body in
          let scrut = self.Ast_mapper.expr self scrut in
          Ast_helper.Exp.let_ Asttypes.Nonrecursive
            [ Ast_helper.Vb.mk (Ast_helper.Pat.var (Location.mknoloc s)) scrut ]
            body
        end)
  | _ -> Ast_mapper.default_mapper.expr self e

let () =
  if Array.length Sys.argv <> 2 then (prerr_endline "usage: unmatch IN.ml"; exit 2);
  let file = Sys.argv.(1) in
  let ic = open_in_bin file in
  let lexbuf = Lexing.from_channel ic in
  Location.init lexbuf file;
  let ast = Parse.implementation lexbuf in
  close_in ic;
  let mapper = { Ast_mapper.default_mapper with expr } in
  let ast = mapper.structure mapper ast in
  print_string "(* Generated by ocaml/unmatch from the extracted code: do not edit. *)\n";
  Format.printf "%a@." Pprintast.structure ast;
  Printf.eprintf "unmatch: %d case analyses written out\n" !rewritten
