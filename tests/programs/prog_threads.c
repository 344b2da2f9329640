// Three threads doing calls, so a trace has several per-thread streams (or several
// threads interleaved on one CPU stream).
#include <pthread.h>
#include <stdio.h>

__attribute__((noinline)) int work(int x) { return x * 7 + 3; }

static void* worker(void* arg) {
  long n = (long)arg;
  long total = 0;
  for (int i = 0; i < 200; ++i) total += work(i + (int)n);
  return (void*)total;
}

int main(void) {
  pthread_t threads[2];
  for (long i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, worker, (void*)i);
  long total = (long)worker((void*)7);
  for (int i = 0; i < 2; ++i) {
    void* result;
    pthread_join(threads[i], &result);
    total += (long)result;
  }
  printf("%ld\n", total);
  return 0;
}
