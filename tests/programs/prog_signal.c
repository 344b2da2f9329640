// A signal handler: raise() makes the kernel deliver SIGUSR1 on the way back from the
// tgkill syscall, the handler runs, and rt_sigreturn resumes the interrupted code.
#include <signal.h>
#include <stdio.h>
#include <string.h>

volatile sig_atomic_t handled;

__attribute__((noinline)) void in_handler(int x) { handled += x; }

static void on_signal(int signo) { in_handler(signo == SIGUSR1 ? 1 : 100); }

int main(void) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = on_signal;
  sigaction(SIGUSR1, &action, NULL);
  for (int i = 0; i < 3; ++i) raise(SIGUSR1);
  printf("%d\n", (int)handled);
  return handled == 3 ? 0 : 1;
}
