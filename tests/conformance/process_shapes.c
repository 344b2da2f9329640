/* The process shapes the conformance suite records: many threads, a fork that does not
 * exec, a posix_spawn. Each does a known number of calls, so a trace can be checked
 * against the source.
 *
 *   ptd_conformance_process_shapes threads N CALLS   N threads, CALLS calls of thread_work each
 *   ptd_conformance_process_shapes fork CHILD PARENT the child makes CHILD calls of child_work
 *                                                    and exits 3; the parent waits, then makes
 *                                                    PARENT calls of parent_work
 *   ptd_conformance_process_shapes spawn PROGRAM...  posix_spawn()s PROGRAM, waits, exits with
 *                                                    its status
 * Prints one line of results to stdout. */
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

static volatile unsigned long sink;

__attribute__((noinline)) unsigned long thread_work(unsigned long x) { return x * 7 + 3; }
__attribute__((noinline)) unsigned long child_work(unsigned long x) { return x * 3 + 1; }
__attribute__((noinline)) unsigned long parent_work(unsigned long x) { return x * 5 + 2; }

static long calls_per_thread;

static void* worker(void* arg) {
  unsigned long x = (unsigned long)arg;
  for (long i = 0; i < calls_per_thread; ++i) x = thread_work(x);
  return (void*)x;
}

static int run_threads(int n, long calls) {
  pthread_t* threads = calloc((size_t)n, sizeof(pthread_t));
  if (threads == NULL) return 2;
  calls_per_thread = calls;
  for (int i = 0; i < n; ++i) {
    if (pthread_create(&threads[i], NULL, worker, (void*)(unsigned long)i) != 0) return 2;
  }
  unsigned long total = 0;
  for (int i = 0; i < n; ++i) {
    void* result;
    pthread_join(threads[i], &result);
    total += (unsigned long)result;
  }
  free(threads);
  printf("%d threads: %lu\n", n, total);
  return 0;
}

static int run_fork(long child_calls, long parent_calls) {
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 2;
  if (child == 0) {
    for (long i = 0; i < child_calls; ++i) sink = child_work(sink + (unsigned long)i);
    _exit(3);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 2;
  for (long i = 0; i < parent_calls; ++i) sink = parent_work(sink + (unsigned long)i);
  printf("child exited %d; parent done\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

static int run_spawn(char** argv) {
  pid_t child;
  if (posix_spawn(&child, argv[0], NULL, NULL, argv, environ) != 0) return 2;
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 2;
  printf("spawned %s: %d\n", argv[0], WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

int main(int argc, char** argv) {
  if (argc >= 4 && strcmp(argv[1], "threads") == 0) return run_threads(atoi(argv[2]), atol(argv[3]));
  if (argc >= 4 && strcmp(argv[1], "fork") == 0) return run_fork(atol(argv[2]), atol(argv[3]));
  if (argc >= 3 && strcmp(argv[1], "spawn") == 0) return run_spawn(argv + 2);
  fprintf(stderr, "usage: %s threads N CALLS | fork CHILD PARENT | spawn PROGRAM...\n", argv[0]);
  return 2;
}
