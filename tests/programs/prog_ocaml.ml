(* OCaml exception handling the decoder must follow: a raise through several frames,
   nested handlers, a re-raise from an inner handler, raise_notrace, and a raise from
   deep recursion. *)
exception Found of int
exception Inner

let rec search n depth =
  if depth = 0 then raise (Found n) else 1 + search (n + 1) (depth - 1)

(* Inner handler catches and re-raises to the outer one. *)
let nested i =
  try
    (try search i 3 with Found k -> raise (Found (k + 1)))
  with Found k -> k

(* raise_notrace from a few frames down; the handler sits in the same function. *)
let rec quiet n = if n = 0 then raise_notrace Inner else 1 + quiet (n - 1)
let notrace () = try quiet 4 with Inner -> 7

(* The handler is in an outer call of the raising function itself: only the trap
   depth tells which frame it belongs to. *)
let rec guarded n = if n = 0 then raise Inner else 1 + (try guarded (n - 1) with Inner -> 10)

(* Deep non-tail recursion, then a raise unwinding all of it. *)
let rec deep n = if n = 0 then raise (Found 99) else 1 + deep (n - 1)

let () =
  let total = ref 0 in
  for i = 1 to 3 do
    (try ignore (search i 5) with Found k -> total := !total + k);
    total := !total + nested i + notrace () + guarded 3
  done;
  (try ignore (deep 300) with Found k -> total := !total + k);
  Printf.printf "%d\n" !total
