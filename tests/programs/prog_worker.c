/* A process to attach to (record --pid, --cgroup): calls worker_a (argv[1] "a", the
 * default) or worker_b ("b") once a millisecond until SIGTERM or SIGINT, then exits 0.
 * Prints "ready" once looping, so a test knows when to attach. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop_requested;
static void on_signal(int signal_number) {
  (void)signal_number;
  stop_requested = 1;
}

volatile long sink;
__attribute__((noinline)) void worker_a(long i) { sink += i * 3; }
__attribute__((noinline)) void worker_b(long i) { sink += i * 5; }

int main(int argc, char** argv) {
  void (*work)(long) = argc > 1 && strcmp(argv[1], "b") == 0 ? worker_b : worker_a;
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  printf("ready\n");
  fflush(stdout);
  const struct timespec pause = {0, 1000000};
  for (long i = 0; !stop_requested; ++i) {
    work(i);
    nanosleep(&pause, NULL);
  }
  return 0;
}
