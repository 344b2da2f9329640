#include "recorder/target/launch_signals.h"

#include <signal.h>

namespace ptd {
namespace {

struct StartupSignalState {
  sigset_t mask;
  bool ignored[NSIG];
};

StartupSignalState CaptureStartupSignalState() {
  StartupSignalState state = {};
  sigprocmask(SIG_BLOCK, nullptr, &state.mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction action = {};
    state.ignored[sig] = sigaction(sig, nullptr, &action) == 0 && action.sa_handler == SIG_IGN;
  }
  return state;
}

// Static initialisation runs before main(), before any recorder touches a signal.
const StartupSignalState g_startup = CaptureStartupSignalState();

}  // namespace

void RestoreStartupSignalState() {
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction action = {};
    action.sa_handler = g_startup.ignored[sig] ? SIG_IGN : SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, nullptr);  // glibc's reserved signals refuse: they stay as they are
  }
  // The child is single-threaded: its mask is the process's.
  sigprocmask(SIG_SETMASK, &g_startup.mask, nullptr);
}

}  // namespace ptd
