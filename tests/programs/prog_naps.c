/* Stretches of work between short sleeps: `rounds` (argv[1], default 200) rounds of
 * work(n) (a loop of n iterations, n varying from round to round), nap (nanosleep of
 * 0.1 to 2 ms) and getppid. Many system calls of varying length between code of known
 * length: the time axis around syscalls, on the virtual and the wall clock. */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

volatile long sink;

__attribute__((noinline)) void work(long n) {
  for (long i = 0; i < n; ++i) sink += i;
}

__attribute__((noinline)) void nap(long us) {
  const struct timespec pause = {0, us * 1000L};
  nanosleep(&pause, NULL);
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 200;
  for (int i = 0; i < rounds; ++i) {
    work(300 + (i * 37) % 500);
    nap(100 + (i * 13) % 2000);
    getppid();
  }
  return 0;
}
