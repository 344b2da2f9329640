// posix_spawn runs ptd_prog_calls (found next to this executable) and waits for it.
// glibc's child runs __spawni_child on a stack of its own (clone with CLONE_VM and
// CLONE_VFORK) and execs the program from there.
#include <limits.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sibling_path.h"

extern char** environ;

int main(void) {
  char path[PATH_MAX];
  if (SiblingPath("ptd_prog_calls", path) != 0) return 2;
  char* argv[] = {path, NULL};
  pid_t child;
  if (posix_spawn(&child, path, NULL, NULL, argv, environ) != 0) return 2;
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 3;
  return 0;
}
