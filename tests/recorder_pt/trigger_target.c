/* Test program for --trigger: calls ptd_trigger_point() a few times, spaced out so the
 * recorder has armed its breakpoints before the first call. argv[1]: number of calls. */
#include <stdlib.h>
#include <unistd.h>

volatile int ptd_trigger_sink;

__attribute__((noinline)) void ptd_trigger_point(int i) {
  ptd_trigger_sink = i;
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char** argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 3;
  int delay_ms = argc > 2 ? atoi(argv[2]) : 300;
  for (int i = 0; i < calls; ++i) {
    usleep(delay_ms * 1000);
    ptd_trigger_point(i);
  }
  usleep(delay_ms * 1000);
  return 0;
}
