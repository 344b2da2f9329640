/* Recording target for the robustness tests: forks; the child execs this program again
 * with "child" (a new image in a traced child), the parent waits for it.
 *
 *   ptd_core_fork_exec_target          parent: fork, child execs "SELF child", wait
 *   ptd_core_fork_exec_target child    10 calls of child_work, exit 7
 *
 * Freestanding (raw_start.h), so neither image spends time in libc start-up. */
#include "raw_start.h"

volatile unsigned long sink;

__attribute__((noinline)) unsigned long child_work(unsigned long x) { return x * 3 + 1; }
__attribute__((noinline)) unsigned long parent_work(unsigned long x) { return x * 5 + 2; }

int main(int argc, char** argv, char** envp) {
  if (argc > 1 && argv[1][0] == 'c') {
    for (unsigned long i = 0; i < 10; ++i) sink = child_work(sink + i);
    return 7;
  }
  long child = raw_syscall(kSysFork, 0, 0, 0, 0);
  if (child < 0) return 1;
  if (child == 0) {
    char* args[3] = {argv[0], (char*)"child", 0};
    raw_syscall(kSysExecve, (long)argv[0], (long)args, (long)envp, 0);
    return 127;
  }
  for (unsigned long i = 0; i < 10; ++i) sink = parent_work(sink + i);
  int status = 0;
  if (raw_syscall(kSysWait4, child, (long)&status, 0, 0) != child) return 1;
  /* Exited (low 7 bits 0) with 7. */
  return (status & 0x7f) == 0 && ((status >> 8) & 0xff) == 7 ? 0 : 1;
}
