(* Exceptions raised through several OCaml frames and caught by an enclosing handler. *)
exception Found of int

let rec search n depth =
  if depth = 0 then raise (Found n) else 1 + search (n + 1) (depth - 1)

let () =
  let total = ref 0 in
  for i = 1 to 20 do
    (try ignore (search i 5) with Found k -> total := !total + k)
  done;
  Printf.printf "%d\n" !total
