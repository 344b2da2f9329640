// longjmp out of five frames: the stack pointer jumps back past them in one instruction.
#include <setjmp.h>
#include <stdio.h>

static jmp_buf env;
volatile int depth_reached;

__attribute__((noinline)) void dive(int depth) {
  depth_reached = depth;
  if (depth >= 4) longjmp(env, depth);
  if (depth > 100) return;  // unreachable; tells the compiler the recursion ends
  dive(depth + 1);
  depth_reached = -1;  // never: keeps the call from being a tail call
}

int main(void) {
  volatile int total = 0;
  for (volatile int i = 0; i < 3; i = i + 1) {
    int value = setjmp(env);
    if (value == 0) {
      dive(0);
    } else {
      total = total + value;
    }
  }
  printf("%d\n", total);
  return 0;
}
