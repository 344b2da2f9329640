// Known branches for `coverage`: classify() takes its negative and its small branch for
// the values main gives it, never the large one, so never_called() never runs.
#include <stdio.h>

__attribute__((noinline)) int never_called(int x) { return x * 3 + 1; }

__attribute__((noinline)) int classify(int x) {
  if (x < 0) return -1;
  if (x > 1000) return never_called(x);  // never taken
  return x & 1;
}

int main(int argc, char** argv) {
  (void)argv;
  int sum = 0;
  for (int i = -3; i < 5 + argc; ++i) sum += classify(i);
  printf("%d\n", sum);
  return 0;
}
