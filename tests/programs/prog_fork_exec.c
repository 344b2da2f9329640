// Forks; the child execs ptd_prog_calls (found next to this executable), the parent
// waits for it and then makes calls of its own. Recorded on one virtual CPU, one PT
// stream runs both processes, the child first with the parent's image, then with
// another program's.
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sibling_path.h"

__attribute__((noinline)) int parent_step(int x) { return x * 7 + 3; }

__attribute__((noinline)) int parent_run(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += parent_step(i);
  return total;
}

int main(void) {
  char path[PATH_MAX];
  if (SiblingPath("ptd_prog_calls", path) != 0) return 2;
  pid_t child = fork();
  if (child < 0) return 2;
  if (child == 0) {
    execl(path, path, (char*)NULL);
    _exit(127);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 3;
  printf("%d\n", parent_run(20));
  return 0;
}
