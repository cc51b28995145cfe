(* The cost bound of the well-formedness check.

   [Matcher.wf_defs] is the extracted Coq check, on lists: [binds] of a
   sub-pattern is recomputed at every guard, [∃] and match constraint above
   it, [app] copies, [inter] and [subset] are quadratic.  Its running time is
   polynomial but can be cubic in the size of a body (a chain of 10000
   match constraints takes hours).  Rather than replace the verified check,
   the reader (decode.ml) bounds its cost first: [bound] is an upper bound
   on the number of list cells it visits, computed in linear time from the
   same recursion structure, and a set whose bound exceeds [limit] is
   rejected (Malformed, "exceeds the limit") before the check runs.  Floats:
   the bounds can exceed 2^62.  Measured: 2-6 ns per counted step, so the
   limit of 10^8 bounds the check to well under a second; realistic
   patterns count a few thousand steps. *)

let limit = 1e8

(* bounds for one pattern: lengths of [binds]/[fbinds] and the costs of
   computing [binds], [fbinds] and [wfb] *)
type cost = { b : float; fb : float; cb : float; cfb : float; cw : float }

(* guard/expression: number of variables read, cost of collecting them *)
let rec expr_cost (e : Matcher.expr) : float * float * float * float =
  match e with
  | Matcher.EConst _ -> (0., 1., 0., 1.)
  | Matcher.EAttr _ -> (1., 1., 0., 1.)
  | Matcher.EFAttr _ -> (0., 1., 1., 1.)
  | Matcher.EAdd (e1, e2) | Matcher.ESub (e1, e2) | Matcher.EMul (e1, e2) ->
      let v1, c1, f1, d1 = expr_cost e1 and v2, c2, f2, d2 = expr_cost e2 in
      (v1 +. v2, c1 +. c2 +. v1 +. 1., f1 +. f2, d1 +. d2 +. f1 +. 1.)

let rec guard_cost (g : Matcher.guard) : float * float * float * float =
  let pair (v1, c1, f1, d1) (v2, c2, f2, d2) =
    (v1 +. v2, c1 +. c2 +. v1 +. 1., f1 +. f2, d1 +. d2 +. f1 +. 1.)
  in
  match g with
  | Matcher.GTrue -> (0., 1., 0., 1.)
  | Matcher.GEq (e1, e2) | Matcher.GLt (e1, e2) -> pair (expr_cost e1) (expr_cost e2)
  | Matcher.GAnd (g1, g2) | Matcher.GOr (g1, g2) -> pair (guard_cost g1) (guard_cost g2)
  | Matcher.GNot g ->
      let v, c, f, d = guard_cost g in
      (v, c +. 1., f, d +. 1.)

let bound (defs : Matcher.pdef array) : float =
  let nd = float_of_int (Array.length defs) in
  let rec pc (p : Matcher.pattern) : cost =
    match p with
    | Matcher.PVar _ -> { b = 1.; fb = 0.; cb = 1.; cfb = 1.; cw = 1. }
    | Matcher.PApp (_, ps) | Matcher.PFunVar (_, ps) ->
        let f = match p with Matcher.PFunVar _ -> 1. | _ -> 0. in
        List.fold_left
          (fun acc q ->
            let c = pc q in
            {
              b = acc.b +. c.b;
              fb = acc.fb +. c.fb;
              cb = acc.cb +. c.cb +. c.b +. 1.;
              cfb = acc.cfb +. c.cfb +. c.fb +. 1.;
              cw = acc.cw +. c.cw +. 1.;
            })
          { b = 0.; fb = f; cb = 1.; cfb = 1.; cw = 1. }
          ps
    | Matcher.PAlt (p1, p2) ->
        let c1 = pc p1 and c2 = pc p2 in
        {
          b = c1.b;
          fb = c1.fb;
          cb = c1.cb +. c2.cb +. (c1.b *. (c2.b +. 1.)) +. 1.;
          cfb = c1.cfb +. c2.cfb +. (c1.fb *. (c2.fb +. 1.)) +. 1.;
          cw = c1.cw +. c2.cw +. 1.;
        }
    | Matcher.PGuard (p0, g) ->
        let c = pc p0 in
        let v, cv, f, cf = guard_cost g in
        {
          c with
          cb = c.cb +. 1.;
          cfb = c.cfb +. 1.;
          cw = c.cw +. cv +. c.cb +. (v *. (c.b +. 1.)) +. cf +. c.cfb +. (f *. (c.fb +. 1.)) +. 1.;
        }
    | Matcher.PExists (_, p0) ->
        let c = pc p0 in
        { c with cb = c.cb +. c.b +. 1.; cfb = c.cfb +. 1.; cw = c.cw +. c.cb +. c.b +. 1. }
    | Matcher.PExistsF (_, p0) ->
        let c = pc p0 in
        { c with cb = c.cb +. 1.; cfb = c.cfb +. c.fb +. 1.; cw = c.cw +. c.cfb +. c.fb +. 1. }
    | Matcher.PConstr (p0, p', _) ->
        let c0 = pc p0 and c' = pc p' in
        {
          b = c0.b +. c'.b;
          fb = c0.fb +. c'.fb;
          cb = c0.cb +. c'.cb +. c0.b +. 1.;
          cfb = c0.cfb +. c'.cfb +. c0.fb +. 1.;
          cw = c0.cw +. c'.cw +. c0.cb +. c0.b +. 1.;
        }
    | Matcher.PCall (q, xs, fs) ->
        (* nth_error of the table, then args_of: nth_error of the
           arguments for each claimed parameter *)
        let d = defs.(q) in
        let pb = float_of_int (List.length d.Matcher.pbinds)
        and pfb = float_of_int (List.length d.Matcher.pfbinds) in
        let nx = float_of_int (List.length xs) and nf = float_of_int (List.length fs) in
        { b = pb; fb = pfb; cb = nd +. (pb *. (nx +. 2.)) +. 1.; cfb = nd +. (pfb *. (nf +. 2.)) +. 1.; cw = 1. }
  in
  Array.fold_left
    (fun acc (d : Matcher.pdef) ->
      let c = pc d.Matcher.body in
      let pb = float_of_int (List.length d.Matcher.pbinds)
      and pfb = float_of_int (List.length d.Matcher.pfbinds) in
      acc +. c.cw +. c.cb +. (pb *. (c.b +. 1.)) +. c.cfb +. (pfb *. (c.fb +. 1.)) +. 1.)
    0. defs
