/* The program scripts/demo records. Kept short: the emulation backend single-steps it. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static long square(long x) { return x * x; }
static long twice(long x) { return 2 * x; }

static long apply_all(long (*const *fns)(long), int n, long x) {
  long acc = 0;
  for (int i = 0; i < n; i++) acc += fns[i](x);
  return acc;
}

static long elapsed_ns(void) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a); /* runs in the vDSO */
  clock_gettime(CLOCK_MONOTONIC, &b);
  return (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
}

static void* worker(void* arg) {
  long* out = arg;
  *out = fib(12);
  return NULL;
}

int main(void) {
  static long (*const fns[])(long) = {square, twice};
  pthread_t t;
  long from_thread = 0;
  pthread_create(&t, NULL, worker, &from_thread);
  long r = fib(10) + apply_all(fns, 2, 7);
  long dt = elapsed_ns();
  pthread_join(t, NULL);
  printf("result %ld %ld (clock step %s)\n", r, from_thread, dt >= 0 ? "ok" : "bad");
  return 0;
}
