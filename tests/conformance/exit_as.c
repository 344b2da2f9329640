/* Conformance target: writes "out" to stdout and "err" to stderr, then ends as asked.
 *
 *   ptd_conformance_exit_as CODE | segv | abort
 *
 * CODE: exit with it; segv: a write through a null pointer (a real SIGSEGV); abort:
 * SIGABRT sent to itself, as abort() does. Freestanding (raw_start.h). */
#include "raw_start.h"

enum { kSysKill = 62 };

static int same(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

int main(int argc, char** argv, char** envp) {
  (void)envp;
  if (argc < 2) return 2;
  raw_syscall(kSysWrite, 1, (long)"out\n", 4, 0);
  raw_syscall(kSysWrite, 2, (long)"err\n", 4, 0);
  if (same(argv[1], "segv")) {
    *(volatile int*)0 = 1;
  } else if (same(argv[1], "abort")) {
    raw_syscall(kSysKill, raw_syscall(kSysGetpid, 0, 0, 0, 0), 6 /* SIGABRT */, 0, 0);
  }
  return (int)raw_parse_ulong(argv[1]);
}
