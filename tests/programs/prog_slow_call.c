// handle_request is fast except on its 7th call, made by a second thread: the target of
// record --trigger-slower-than. The calls come in a fixed order (the worker's 10, then
// main's 4 after the join), so the Nth hit is a known call. "loop" makes the slow call
// long in instructions (Valgrind's virtual clock), "sleep" long in wall time (ptrace,
// which would take minutes to single-step a long loop).
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int sleep_mode;
static volatile long sink;

__attribute__((noinline)) long handle_request(int n) {
  long total = n;
  if (n == 7) {
    if (sleep_mode) {
      struct timespec pause = {0, 300 * 1000 * 1000};
      nanosleep(&pause, NULL);
    } else {
      for (long i = 0; i < 2000000; ++i) sink = sink + i;
    }
  }
  for (int i = 0; i < 10; ++i) total = total * 3 + i;
  return total;
}

static void* worker(void* arg) {
  (void)arg;
  long total = 0;
  for (int n = 1; n <= 10; ++n) total += handle_request(n);
  return (void*)total;
}

int main(int argc, char** argv) {
  sleep_mode = argc > 1 && strcmp(argv[1], "sleep") == 0;
  pthread_t thread;
  pthread_create(&thread, NULL, worker, NULL);
  void* result;
  pthread_join(thread, &result);
  long total = (long)result;
  for (int n = 11; n <= 14; ++n) total += handle_request(n);
  printf("%ld\n", total);
  return 0;
}
