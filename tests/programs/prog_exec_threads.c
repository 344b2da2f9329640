// A second thread blocks in blocked_reader (reading a pipe nobody writes) while main
// execs ptd_prog_calls (found next to this executable) from exec_calls: the exec ends
// the reader with the rest of the old program, and the process goes on as
// ptd_prog_calls.
#include <limits.h>
#include <pthread.h>
#include <unistd.h>

#include "sibling_path.h"

static int ready[2];    // the reader says it runs
static int blocked[2];  // never written

__attribute__((noinline)) static void* blocked_reader(void* arg) {
  char c = 0;
  if (write(ready[1], &c, 1) != 1) return arg;
  (void)!read(blocked[0], &c, 1);
  return arg;
}

__attribute__((noinline)) static int exec_calls(const char* path) {
  execl(path, path, (char*)NULL);
  return 127;
}

int main(void) {
  char path[PATH_MAX];
  if (SiblingPath("ptd_prog_calls", path) != 0) return 2;
  if (pipe(ready) != 0 || pipe(blocked) != 0) return 2;
  pthread_t reader;
  if (pthread_create(&reader, NULL, blocked_reader, NULL) != 0) return 2;
  char c;
  if (read(ready[0], &c, 1) != 1) return 2;
  return exec_calls(path);
}
