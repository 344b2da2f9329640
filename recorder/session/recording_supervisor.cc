#include "recorder/session/recording_supervisor.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include "common/file_util.h"

namespace ptd {
namespace {

constexpr int kPassedOn[] = {SIGINT, SIGTERM, SIGUSR2};

std::atomic<pid_t> g_child{0};

// Signals another process sent to the supervisor go to the recording. The kernel's own
// (a terminal's Ctrl-C: SI_KERNEL) went to the whole process group, the child included.
void PassOn(int signo, siginfo_t* info, void*) {
  if (info != nullptr && info->si_code == SI_KERNEL) return;
  const pid_t child = g_child.load();
  if (child > 0) kill(child, signo);
}

}  // namespace

absl::StatusOr<int> RunSupervised(absl::FunctionRef<int()> record) {
  fflush(nullptr);  // nothing buffered is written twice
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) return ErrnoError("cannot fork", "the recording process", errno);
  if (child == 0) {
    // SIGTERM, not SIGKILL: the recording ends the way `kill` ends it, detached and committed.
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) raise(SIGTERM);
    const int code = record();
    fflush(nullptr);
    _exit(code);
  }
  g_child.store(child);
  struct sigaction action = {};
  action.sa_sigaction = PassOn;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  struct sigaction saved[3];
  for (int i = 0; i < 3; ++i) sigaction(kPassedOn[i], &action, &saved[i]);
  int status = 0;
  pid_t waited;
  do {
    waited = waitpid(child, &status, 0);
  } while (waited < 0 && errno == EINTR);
  for (int i = 0; i < 3; ++i) sigaction(kPassedOn[i], &saved[i], nullptr);
  g_child.store(0);
  if (waited != child) return ErrnoError("cannot wait for", "the recording process", errno);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace ptd
