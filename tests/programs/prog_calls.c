// Recursion, calls through function pointers, tail calls and PLT calls into libc.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*unary_fn)(int);

__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__attribute__((noinline)) int twice(int x) { return 2 * x; }
__attribute__((noinline)) int thrice(int x) { return 3 * x; }
__attribute__((noinline)) int tail_target(int x) { return x ^ 0x55; }
// At -O2 this is a sibling call: `jmp tail_target`, no call instruction.
__attribute__((noinline)) int tail_caller(int x) { return tail_target(x * 5 + 1); }

volatile int sink;

int main(int argc, char** argv) {
  unary_fn table[2] = {twice, thrice};
  int total = 0;
  for (int i = 0; i < 100; ++i) {
    total += table[i & 1](i);
    total += tail_caller(i);
  }
  total += fib(12);
  char text[64];
  snprintf(text, sizeof(text), "%d", total);
  total += (int)strlen(text) + (int)strlen(argv[0]) + argc;
  sink = total;
  printf("%d\n", total);
  return 0;
}
