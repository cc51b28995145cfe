(* The extracted dominator checker (Dominates.dom_result, dom_all) against a
   brute force transcription of the declarative property
   (Dominates.dominates_spec: the region as a least fixpoint, then its five
   conditions), on random graphs whose ids are a topological order, and on
   graphs that break the order (the checker must say no). With the right
   users table the answers are equal (dom_check_correct); with a corrupted
   one a yes must still be right (dom_check_sound). *)

module M = Matcher

let failures = ref 0
let checks = ref 0

let check name cond =
  incr checks;
  if not cond then begin
    incr failures;
    Printf.printf "FAIL: %s\n%!" name
  end

(* the declarative property, brute force over n nodes *)
let spec n ch konst live is_out is_p is_i root =
  root < n
  &&
  let reach = Array.make n false in
  reach.(root) <- true;
  let expands x = x = root || not (is_p x) in
  for _ = 0 to n do
    for m = 0 to n - 1 do
      if reach.(m) && expands m then
        List.iter (fun c -> if c < n && not (konst c) then reach.(c) <- true) (ch m)
    done
  done;
  let region = List.filter (fun x -> reach.(x)) (List.init n Fun.id) in
  let others = List.filter (fun x -> x <> root) region in
  let users x = List.filter (fun u -> live u && List.mem x (ch u)) (List.init n Fun.id) in
  List.for_all (fun x -> is_p x || is_i x) others
  && (match List.filter is_p others with [ _ ] -> true | _ -> false)
  && List.for_all
       (fun x -> (not (expands x)) || List.exists (fun c -> not (konst c)) (ch x))
       region
  && List.for_all
       (fun x -> (not (is_out x)) && users x <> [] && List.for_all (fun u -> reach.(u)) (users x))
       others

let () =
  Random.init 17;
  let agree = ref 0 and yes = ref 0 in
  for round = 1 to 20000 do
    let n = 1 + Random.int 8 in
    let topo = round mod 10 <> 0 in
    let ch =
      Array.init n (fun t ->
          if t = 0 then []
          else
            List.init (Random.int 3) (fun _ ->
                if topo then Random.int t else Random.int n))
    in
    let bits () = Array.init n (fun _ -> Random.int 4 = 0) in
    let konst = bits () and is_out = bits () in
    let live = Array.init n (fun _ -> Random.int 8 <> 0) in
    let p = Array.init n (fun _ -> Random.int 3 = 0) and i = Array.init n (fun _ -> Random.int 3 <> 0) in
    let is_topo = Array.for_all Fun.id (Array.mapi (fun t cs -> List.for_all (fun c -> c < t) cs) ch) in
    let get a x = x >= 0 && x < n && a.(x) in
    let chf x = if x >= 0 && x < n then ch.(x) else [] in
    let users =
      Array.init n (fun x ->
          List.filter (fun u -> live.(u) && List.mem x ch.(u)) (List.init n Fun.id))
    in
    let uf x = if x >= 0 && x < n then users.(x) else [] in
    (* a corrupted table: one node's users dropped or one extra user *)
    let bad = Array.copy users in
    let v = Random.int n in
    bad.(v) <- (if bad.(v) <> [] && Random.bool () then List.tl bad.(v) else Random.int n :: bad.(v));
    let badf x = if x >= 0 && x < n then bad.(x) else [] in
    let c = Array.init n (fun _ -> Random.int 2 = 0) in
    let all = M.dom_all n chf (get konst) (get live) (get is_out) (get p) (get i) (get c) uf in
    check (Printf.sprintf "round %d: dom_all answers iff topological" round)
      ((all <> None) = is_topo);
    for root = 0 to n - 1 do
      let (ok, parent), region =
        M.dom_result n chf (get konst) (get live) (get is_out) (get p) (get i) uf root
      in
      let want =
        is_topo && spec n chf (get konst) (get live) (get is_out) (get p) (get i) root
      in
      check (Printf.sprintf "round %d root %d: checker %b, spec %b" round root ok want) (ok = want);
      if ok = want then incr agree;
      if ok then begin
        incr yes;
        check "parent in the region"
          (match parent with Some q -> List.mem q region && q <> root && p.(q) | None -> false)
      end;
      let (bad_ok, _), _ =
        M.dom_result n chf (get konst) (get live) (get is_out) (get p) (get i) badf root
      in
      check (Printf.sprintf "round %d root %d: a wrong table gave a wrong yes" round root)
        ((not bad_ok) || want);
      match all with
      | None -> ()
      | Some l ->
          let e = List.filter (fun (((t, _), _), _) -> t = root) l in
          check (Printf.sprintf "round %d root %d: dom_all" round root)
            (if c.(root) then
               (match e with [ (((_, b), q), r) ] -> b = ok && q = parent && r = region | _ -> false)
             else e = [])
    done
  done;
  Printf.printf "test_dominates: %d agreements (%d yes), %d checks, %d failures\n" !agree !yes
    !checks !failures;
  exit (if !failures = 0 then 0 else 1)
