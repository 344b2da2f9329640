// Two builds of one program for `ptrace-direct diff`: parse() calls step() WORK_LOOPS
// times (ptd_prog_diff_a: 100, ptd_prog_diff_b: 150); everything else is the same.
#include <stdio.h>

#ifndef WORK_LOOPS
#define WORK_LOOPS 100
#endif

static volatile unsigned long sink;

__attribute__((noinline)) unsigned long step(unsigned long x) { return x * 2654435761u + 7; }

__attribute__((noinline)) unsigned long parse(void) {
  unsigned long x = 1;
  for (int i = 0; i < WORK_LOOPS; ++i) x = step(x);
  return x;
}

__attribute__((noinline)) unsigned long emit(unsigned long x) { return x ^ (x >> 7); }

int main(void) {
  sink = emit(parse());
  printf("%lu\n", (unsigned long)(sink & 0xff));
  return 0;
}
