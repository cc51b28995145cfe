(* Input of the unmatch test (dune rules in this directory): functions in
   the shape the extraction gives a case analysis on a number (the case
   functions of ExtrOcamlNatInt and ExtrOcamlZInt, verbatim), with the
   hazards a rewrite could get wrong: continuations that name an outer
   variable spelled like the case function's own parameter, or one the
   case function's body binds (that one must be left alone), a scrutinee
   with an effect (its order against the continuations' effects), nested
   cases, a recursion through a continuation. unmatch_sample.exe runs this
   file as written, unmatch_rewritten.exe runs what unmatch makes of it;
   the test compares their outputs. *)

let rec nth_error l n =
  match l with
  | [] -> None
  | x :: l' ->
    ((fun fO fS n -> if n=0 then fO () else fS (n-1))
       (fun _ -> Some x)
       (fun n0 -> nth_error l' n0)
       n)

(* the continuations read the outer [n], not the case function's *)
let capture n m =
  ((fun fO fS n -> if n=0 then fO () else fS (n-1))
     (fun _ -> n + 100)
     (fun k -> n * 1000 + k)
     m)

let rec bits p =
  ((fun f2p1 f2p f1 p ->
  if p<=1 then f1 () else if p mod 2 = 0 then f2p (p/2) else f2p1 (p/2))
     (fun q -> 1 :: bits q)
     (fun q -> 0 :: bits q)
     (fun _ -> [])
     p)

let pcapture p q =
  ((fun f2p1 f2p f1 p ->
  if p<=1 then f1 () else if p mod 2 = 0 then f2p (p/2) else f2p1 (p/2))
     (fun ii -> p + ii)
     (fun ii -> p - ii)
     (fun _ -> p)
     q)

let zcase z w =
  ((fun f0 fp fn z -> if z=0 then f0 () else if z>0 then fp z else fn (-z))
     (fun _ -> z)
     (fun p -> z + p)
     (fun p -> z - 2 * p)
     w)

(* nested: a case in a continuation of a case *)
let nested a b =
  ((fun fO fS n -> if n=0 then fO () else fS (n-1))
     (fun _ -> -1)
     (fun a' ->
       ((fun fO fS n -> if n=0 then fO () else fS (n-1))
          (fun _ -> a' * 10)
          (fun b' -> a' * 10 + b' + a)
          b))
     a)

(* a case function whose body binds a name a continuation reads: left as
   it is (inlining the continuation there would capture the outer [y]) *)
let bind_hazard y m =
  ((fun fO fS n -> let y = 0 in if n=0 then fO () else fS (n-1+y))
     (fun _ -> y)
     (fun k -> y * 10 + k)
     m)

(* the scrutinee's effect comes before the continuation's *)
let effects k =
  let log = ref [] in
  let f x = log := x :: !log; x in
  let r =
    ((fun fO fS n -> if n=0 then fO () else fS (n-1))
       (fun _ -> f 0)
       (fun j -> f (100 + j))
       (f k))
  in
  (r, List.rev !log)

let () =
  let ints l = "[" ^ String.concat ";" (List.map string_of_int l) ^ "]" in
  let opt = function None -> "None" | Some x -> string_of_int x in
  for i = 0 to 4 do
    Printf.printf "nth_error %d %s\n" i (opt (nth_error [ 7; 8; 9 ] i))
  done;
  for m = 0 to 3 do Printf.printf "capture 5 %d %d\n" m (capture 5 m) done;
  for p = 1 to 9 do Printf.printf "bits %d %s\n" p (ints (bits p)) done;
  for q = 1 to 6 do Printf.printf "pcapture 40 %d %d\n" q (pcapture 40 q) done;
  for w = -3 to 3 do Printf.printf "zcase 7 %d %d\n" w (zcase 7 w) done;
  for a = 0 to 2 do
    for b = 0 to 2 do Printf.printf "nested %d %d %d\n" a b (nested a b) done
  done;
  for m = 0 to 2 do Printf.printf "bind_hazard 7 %d %d\n" m (bind_hazard 7 m) done;
  for k = 0 to 2 do
    let r, log = effects k in
    Printf.printf "effects %d %d %s\n" k r (ints log)
  done
