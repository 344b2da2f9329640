/* Recording target for the robustness tests: a loop of calls that runs until it is
 * killed or has made ITERATIONS rounds (a bound, so a test that goes wrong still ends).
 *
 *   ptd_core_spin_target PIDFILE [ITERATIONS]
 *
 * Writes its pid to PIDFILE (through PIDFILE.tmp and rename, so a reader never sees a
 * half-written file), then loops. Freestanding (raw_start.h): single-stepping reaches
 * the loop after a few hundred instructions. */
#include "raw_start.h"

volatile unsigned long sink;

__attribute__((noinline)) unsigned long spin_leaf(unsigned long x) { return x * 2654435761u + 1; }
__attribute__((noinline)) unsigned long spin_step(unsigned long x) { return spin_leaf(x) ^ spin_leaf(x + 1); }

int main(int argc, char** argv, char** envp) {
  (void)envp;
  if (argc < 2) return 2;
  unsigned long iterations = argc > 2 ? raw_parse_ulong(argv[2]) : 100000000ul;
  char tmp[4096];
  unsigned long n = raw_strlen(argv[1]);
  if (n + 5 > sizeof(tmp)) return 1;
  for (unsigned long i = 0; i < n; ++i) tmp[i] = argv[1][i];
  tmp[n] = '.', tmp[n + 1] = 't', tmp[n + 2] = 'm', tmp[n + 3] = 'p', tmp[n + 4] = 0;
  char digits[24];
  int len = 0;
  for (long pid = raw_syscall(kSysGetpid, 0, 0, 0, 0); pid > 0 || len == 0; pid /= 10) digits[len++] = (char)('0' + pid % 10);
  char text[25];
  for (int i = 0; i < len; ++i) text[i] = digits[len - 1 - i];
  text[len] = '\n';
  long fd = raw_syscall(kSysOpen, (long)tmp, 01 | 0100 | 01000 /* O_WRONLY|O_CREAT|O_TRUNC */, 0644, 0);
  if (fd < 0) return 1;
  if (raw_syscall(kSysWrite, fd, (long)text, len + 1, 0) != len + 1) return 1;
  raw_syscall(kSysClose, fd, 0, 0, 0);
  if (raw_syscall(kSysRename, (long)tmp, (long)argv[1], 0, 0) != 0) return 1;
  unsigned long x = 0;
  for (unsigned long i = 0; i < iterations; ++i) x = spin_step(x + i);
  sink = x;
  return 0;
}
