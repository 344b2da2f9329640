/* Freestanding start-up for the robustness test targets: no libc at all, so
 * single-stepping them costs a few hundred instructions instead of the ~30 000 of a
 * static glibc's start-up. Each program defines `int main(int argc, char** argv,
 * char** envp)`; raw Linux x86-64 system calls below. */
#ifndef PTD_RAW_START_H
#define PTD_RAW_START_H

static inline long raw_syscall(long n, long a, long b, long c, long d) {
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
  return ret;
}

enum { kSysWrite = 1, kSysOpen = 2, kSysClose = 3, kSysGetpid = 39, kSysFork = 57,
       kSysExecve = 59, kSysWait4 = 61, kSysRename = 82, kSysExitGroup = 231 };

int main(int argc, char** argv, char** envp);

__attribute__((noreturn, used)) void raw_start_c(long* sp) {
  int argc = (int)sp[0];
  char** argv = (char**)(sp + 1);
  int status = main(argc, argv, argv + argc + 1);
  for (;;) raw_syscall(kSysExitGroup, status, 0, 0, 0);
}

__asm__(".text\n.global _start\n_start:\n  xor %rbp, %rbp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call raw_start_c\n  hlt\n");

static inline unsigned long raw_strlen(const char* s) {
  unsigned long n = 0;
  while (s[n] != 0) ++n;
  return n;
}

static inline unsigned long raw_parse_ulong(const char* s) {
  unsigned long v = 0;
  for (; *s >= '0' && *s <= '9'; ++s) v = v * 10 + (unsigned long)(*s - '0');
  return v;
}

#endif
