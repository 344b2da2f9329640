/* Target of the emulated --pid test: runs for about a second, checking its own arithmetic,
 * so a tracer that attaches mid-run, single-steps it and detaches must leave its registers
 * and memory exactly right. Prints "ready" once running. argv[1]: iterations (2 ms each). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) long step(long i) { return i * i % 7 + 1; }

volatile long expected_sink;

int main(int argc, char** argv) {
  int iterations = argc > 1 ? atoi(argv[1]) : 500;
  long total = 0;
  struct timespec pause = {0, 2000000};
  printf("ready\n");
  fflush(stdout);
  for (int i = 0; i < iterations; ++i) {
    total += step(i);
    nanosleep(&pause, NULL);
  }
  long expected = 0;
  for (long i = 0; i < iterations; ++i) expected_sink = expected += i * i % 7 + 1;
  return total == expected ? 0 : 3;
}
