// The functions of ptd_prog_linked_* (linked into the executable, or into a shared
// library of their own): recursion, calls through function pointers, a tail call, and a
// static function only the full symbol table (or the debug file) names.
#include "linked_functions.h"

__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__attribute__((noinline)) int twice(int x) { return 2 * x; }
__attribute__((noinline)) int thrice(int x) { return 3 * x; }
__attribute__((noinline)) int tail_target(int x) { return x ^ 0x55; }
// At -O2 this is a sibling call: `jmp tail_target`, no call instruction.
__attribute__((noinline)) int tail_caller(int x) { return tail_target(x * 5 + 1); }

static volatile int step_sink;
__attribute__((noinline)) static void local_step(int x) { step_sink = x; }

int run_linked_functions(int rounds) {
  unary_fn table[2] = {twice, thrice};
  int total = 0;
  for (int i = 0; i < rounds; ++i) {
    total += table[i & 1](i);
    total += tail_caller(i);
    local_step(total);
  }
  return total + fib(10);
}
