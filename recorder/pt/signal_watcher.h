#pragma once
// SIGINT / SIGTERM / SIGUSR2 as readable events on an fd (signalfd), so the record loop
// handles them between ring reads instead of in an async handler. The signals are
// blocked in the calling thread for the watcher's lifetime; create it before starting
// other threads so they inherit the mask.

#include <signal.h>

#include <vector>

#include "absl/status/statusor.h"

namespace ptd::pt {

class SignalWatcher {
 public:
  static absl::StatusOr<SignalWatcher> Create(const std::vector<int>& signals);
  SignalWatcher(SignalWatcher&& other) noexcept;
  SignalWatcher& operator=(SignalWatcher&&) = delete;
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  // Closes the fd, drops signals still pending for the watched set, restores the mask.
  ~SignalWatcher();

  int fd() const { return fd_; }
  // Every signal queued now (non-blocking); empty when none.
  std::vector<int> ReadPending();

 private:
  SignalWatcher(int fd, sigset_t old_mask);

  int fd_ = -1;
  sigset_t old_mask_;
};

}  // namespace ptd::pt
