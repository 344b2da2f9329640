#pragma once
// What linked_main.c calls in linked_functions.c.

typedef int (*unary_fn)(int);

int fib(int n);
int twice(int x);
int thrice(int x);
int tail_target(int x);
int tail_caller(int x);
// Calls each function above `rounds` times or so; returns a sum so nothing is optimised away.
int run_linked_functions(int rounds);
