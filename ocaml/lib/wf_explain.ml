(* The ill-formedness explainer: a human-readable reason why a definition
   table fails [Matcher.wf_defs].  Used for error messages only; the verdict
   is always the extracted check's. *)

(* The first construct (in prefix order) of a body that [Matcher.wfb]
   rejects. *)
let rec first_problem (defs : Matcher.pdef list) (p : Matcher.pattern) : string option =
  let sub = first_problem defs in
  let first_of l = List.find_map sub l in
  let missing req have = List.find_opt (fun x -> not (List.mem x have)) req in
  match p with
  | Matcher.PVar _ | Matcher.PCall _ -> None
  | Matcher.PApp (_, ps) | Matcher.PFunVar (_, ps) -> first_of ps
  | Matcher.PAlt (p1, p2) -> first_of [ p1; p2 ]
  | Matcher.PGuard (p0, g) -> (
      match sub p0 with
      | Some _ as r -> r
      | None -> (
          match missing (Matcher.guard_vars g) (Matcher.binds defs p0) with
          | Some x ->
              Some
                (Printf.sprintf
                   "a guard reads variable %d, which the guarded pattern does not bind on every \
                    match"
                   x)
          | None -> (
              match missing (Matcher.guard_fvars g) (Matcher.fbinds defs p0) with
              | Some f ->
                  Some
                    (Printf.sprintf
                       "a guard reads operator variable %d, which the guarded pattern does not \
                        bind on every match"
                       f)
              | None -> None)))
  | Matcher.PExists (x, p0) -> (
      match sub p0 with
      | Some _ as r -> r
      | None ->
          if List.mem x (Matcher.binds defs p0) then None
          else
            Some
              (Printf.sprintf "exists %d: its body does not bind variable %d on every match" x x))
  | Matcher.PExistsF (f, p0) -> (
      match sub p0 with
      | Some _ as r -> r
      | None ->
          if List.mem f (Matcher.fbinds defs p0) then None
          else
            Some
              (Printf.sprintf
                 "exists operator %d: its body does not bind operator variable %d on every match" f
                 f))
  | Matcher.PConstr (p0, p', x) -> (
      match first_of [ p0; p' ] with
      | Some _ as r -> r
      | None ->
          if List.mem x (Matcher.binds defs p0) then None
          else
            Some
              (Printf.sprintf
                 "a match constraint on variable %d, which the constrained pattern does not bind \
                  on every match"
                 x))

(* The first variable (in prefix order) a body reads out of scope
   ([Matcher.scoped]): [`Term x] or [`Op f], neither a parameter ([x < n],
   [f < m]) nor bound by an enclosing exists. *)
let rec out_of_scope n m (bv : int list) (bf : int list) (p : Matcher.pattern) =
  let sub = out_of_scope n m bv bf in
  let tv x = if x < n || List.mem x bv then None else Some (`Term x) in
  let fv f = if f < m || List.mem f bf then None else Some (`Op f) in
  let first l = List.find_map (fun x -> x) l in
  match p with
  | Matcher.PVar x -> tv x
  | Matcher.PApp (_, ps) -> List.find_map sub ps
  | Matcher.PFunVar (f, ps) -> first [ fv f; List.find_map sub ps ]
  | Matcher.PAlt (p1, p2) -> first [ sub p1; sub p2 ]
  | Matcher.PGuard (p0, g) ->
      first
        [
          sub p0;
          List.find_map tv (Matcher.guard_vars g);
          List.find_map fv (Matcher.guard_fvars g);
        ]
  | Matcher.PExists (x, p0) -> out_of_scope n m (x :: bv) bf p0
  | Matcher.PExistsF (f, p0) -> out_of_scope n m bv (f :: bf) p0
  | Matcher.PConstr (p0, p', x) -> first [ sub p0; sub p'; tv x ]
  | Matcher.PCall (_, xs, fs) -> first [ List.find_map tv xs; List.find_map fv fs ]

(* The message for a table that [Matcher.wf_defs] rejects: the first
   definition [Matcher.wf_def] rejects, and its first offending construct,
   pbinds/pfbinds claim or variable out of scope. *)
let explain (defs : Matcher.pdef list) : string =
  let rec go i = function
    | [] -> "patterns: the definitions are not well-formed"
    | (d : Matcher.pdef) :: rest ->
        if Matcher.wf_def defs d then go (i + 1) rest
        else begin
          match first_problem defs d.Matcher.body with
          | Some m -> Printf.sprintf "patterns: definition %d: %s" i m
          | None -> (
              let bs = Matcher.binds defs d.Matcher.body in
              match List.find_opt (fun x -> not (List.mem x bs)) d.Matcher.pbinds with
              | Some x ->
                  Printf.sprintf
                    "patterns: definition %d: pbinds claims parameter %d, which the body does not \
                     bind on every match"
                    i x
              | None -> (
                  let fbs = Matcher.fbinds defs d.Matcher.body in
                  match List.find_opt (fun f -> not (List.mem f fbs)) d.Matcher.pfbinds with
                  | Some f ->
                      Printf.sprintf
                        "patterns: definition %d: pfbinds claims operator parameter %d, which the \
                         body does not bind on every match"
                        i f
                  | None -> (
                      let n = d.Matcher.nparams and m = d.Matcher.nfparams in
                      match out_of_scope n m [] [] d.Matcher.body with
                      | Some (`Term x) ->
                          Printf.sprintf
                            "patterns: definition %d: variable %d is out of scope (the definition \
                             has %d parameters, and no enclosing exists binds it)"
                            i x n
                      | Some (`Op f) ->
                          Printf.sprintf
                            "patterns: definition %d: operator variable %d is out of scope (the \
                             definition has %d operator parameters, and no enclosing exists binds \
                             it)"
                            i f m
                      | None -> Printf.sprintf "patterns: definition %d: not well-formed" i)))
        end
  in
  go 0 defs
