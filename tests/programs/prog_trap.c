// Runs some code, then an instruction that raises SIGILL (ud2): the program dies of it.
#include <stdio.h>

__attribute__((noinline)) int before_trap(int x) { return x * 3 + 1; }

int main(void) {
  int total = 0;
  for (int i = 0; i < 10; ++i) total += before_trap(i);
  printf("%d\n", total);
  fflush(stdout);
  __builtin_trap();
}
