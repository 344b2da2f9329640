#include "recorder/pt/signal_watcher.h"

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/file_util.h"

namespace ptd::pt {

absl::StatusOr<SignalWatcher> SignalWatcher::Create(const std::vector<int>& signals) {
  sigset_t watched;
  sigemptyset(&watched);
  for (int sig : signals) sigaddset(&watched, sig);
  sigset_t old_mask;
  if (int err = pthread_sigmask(SIG_BLOCK, &watched, &old_mask); err != 0) {
    return ErrnoError("pthread_sigmask", "signals", err);
  }
  int fd = signalfd(-1, &watched, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return ErrnoError("signalfd", "signals", err);
  }
  return SignalWatcher(fd, old_mask);
}

SignalWatcher::SignalWatcher(int fd, sigset_t old_mask) : fd_(fd), old_mask_(old_mask) {}

SignalWatcher::SignalWatcher(SignalWatcher&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), old_mask_(other.old_mask_) {}

SignalWatcher::~SignalWatcher() {
  if (fd_ < 0) return;
  ReadPending();  // a signal that arrived during shutdown must not kill us on unblock
  close(fd_);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::vector<int> SignalWatcher::ReadPending() {
  std::vector<int> out;
  signalfd_siginfo info;
  while (read(fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    out.push_back(static_cast<int>(info.ssi_signo));
  }
  return out;
}

}  // namespace ptd::pt
