#include "recorder/pt/record_session.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"

namespace ptd::pt {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

RecordSession::RecordSession(SessionOptions options, SnapshotTaker* taker)
    : options_(std::move(options)), taker_(taker), trigger_policy_(options_.trigger),
      status_line_(stderr, options_.quiet) {}

RecordSession::~RecordSession() {
  if (pidfd_ >= 0) close(pidfd_);
}

absl::Status RecordSession::Prepare() {
  if (options_.handle_signals && signals_ == nullptr) {
    absl::StatusOr<SignalWatcher> watcher = SignalWatcher::Create({SIGINT, SIGTERM, SIGUSR2});
    if (!watcher.ok()) return watcher.status();
    signals_ = std::make_unique<SignalWatcher>(*std::move(watcher));
  }
  if (!options_.control_fifo.empty() && control_ == nullptr) {
    absl::StatusOr<ControlFifo> fifo = ControlFifo::Open(options_.control_fifo);
    if (!fifo.ok()) return fifo.status();
    control_ = std::make_unique<ControlFifo>(*std::move(fifo));
  }
  return absl::OkStatus();
}

absl::Status RecordSession::WatchTarget(int pid) {
  if (pidfd_ >= 0) close(pidfd_);
  pidfd_ = -1;
  if (pid <= 0) return absl::OkStatus();
  long fd = syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) return ErrnoError("pidfd_open", absl::StrCat("process ", pid), errno);
  pidfd_ = static_cast<int>(fd);
  return absl::OkStatus();
}

void RecordSession::SetTrigger(BreakpointTrigger trigger) {
  trigger_ = std::make_unique<BreakpointTrigger>(std::move(trigger));
}

absl::Status RecordSession::Finish(const std::string& reason) {
  absl::Status st = taker_->Snapshot(reason);
  status_line_.Finish();
  return st;
}

absl::StatusOr<std::string> RecordSession::Run() {
  absl::Status prepared = Prepare();
  if (!prepared.ok()) return prepared;
  enum class Kind { kSignal, kControl, kTarget, kTrigger, kWakeup };
  std::vector<pollfd> fds;
  std::vector<Kind> kinds;
  auto add = [&](int fd, Kind kind) {
    fds.push_back(pollfd{fd, POLLIN, 0});
    kinds.push_back(kind);
  };
  if (signals_) add(signals_->fd(), Kind::kSignal);
  if (control_) add(control_->fd(), Kind::kControl);
  if (pidfd_ >= 0) add(pidfd_, Kind::kTarget);
  if (trigger_) {
    for (int fd : trigger_->fds()) add(fd, Kind::kTrigger);
  }
  for (int fd : taker_->WakeupFds()) add(fd, Kind::kWakeup);
  // Armed only now that every breakpoint fd is in the set we poll.
  if (trigger_) {
    absl::Status armed = trigger_->Arm();
    if (!armed.ok()) return armed;
  }

  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point next_drain = start;
  Clock::time_point next_status = start;
  const auto drain_every = std::chrono::milliseconds(options_.drain_interval_ms);
  while (true) {
    const Clock::time_point now = Clock::now();
    if (options_.duration_s > 0 && SecondsSince(start) >= options_.duration_s) {
      absl::Status st = Finish("duration");
      if (!st.ok()) return st;
      return std::string("duration");
    }
    if (now >= next_status) {
      status_line_.Update(SecondsSince(start), taker_->counters());
      next_status = now + std::chrono::milliseconds(500);
    }
    Clock::time_point wake = std::min(next_drain, next_status);
    if (options_.duration_s > 0) {
      wake = std::min(wake, start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.duration_s)));
    }
    const int timeout_ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1));
    int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) return ErrnoError("poll", "record loop", errno);

    bool drain_now = Clock::now() >= next_drain;
    for (size_t i = 0; ready > 0 && i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const short revents = fds[i].revents;
      fds[i].revents = 0;
      switch (kinds[i]) {
        case Kind::kSignal:
          for (int sig : signals_->ReadPending()) {
            if (sig == SIGUSR2) {
              absl::Status st = taker_->Snapshot("sigusr2");
              if (!st.ok()) return st;
              continue;
            }
            const std::string reason = sig == SIGINT ? "sigint" : "sigterm";
            absl::Status st = Finish(reason);
            if (!st.ok()) return st;
            return reason;
          }
          break;
        case Kind::kControl:
          for (const ControlLine& line : control_->ReadLines()) {
            if (line.command == ControlCommand::kSnapshot) {
              absl::Status st = taker_->Snapshot("control");
              if (!st.ok()) {
                (void)control_->Answer(absl::StrCat("error: ", st.message()));
                return st;
              }
              absl::Status answered = control_->Answer("ack");
              if (!answered.ok()) return answered;
            } else if (line.command == ControlCommand::kStop) {
              absl::Status st = Finish("control");
              (void)control_->Answer(st.ok() ? "ack" : absl::StrCat("error: ", st.message()));
              if (!st.ok()) return st;
              return std::string("control");
            } else {
              notes_.push_back(absl::StrCat("control: unknown command \"", line.text, "\""));
              absl::Status answered = control_->Answer(absl::StrCat(
                  "error: unknown command \"", line.text, "\" (want snapshot or stop)"));
              if (!answered.ok()) return answered;
            }
          }
          break;
        case Kind::kTarget: {
          absl::Status st = Finish("exit");
          if (!st.ok()) return st;
          return std::string("exit");
        }
        case Kind::kTrigger: {
          absl::StatusOr<int> hits = trigger_->Consume(fds[i].fd);
          if (!hits.ok()) return hits.status();
          if (*hits == 0) {
            // Hung up without a hit: its thread is gone. Stop polling it.
            if (revents & (POLLHUP | POLLERR)) fds[i].fd = -1;
            break;
          }
          bool fired = false;
          for (int hit = 0; hit < *hits; ++hit) {
            // The thread and time are not read from the breakpoint's sample (yet).
            fired = trigger_policy_.OnEntry(-1, -1, 0, 0).has_value() || fired;
          }
          if (fired && !options_.multi_snapshot) {
            notes_.push_back(absl::StrFormat("trigger hit at 0x%x", trigger_->address()));
            notes_.push_back(trigger_policy_.Describe(trigger_->address()));
            absl::Status st = Finish("trigger");
            if (!st.ok()) return st;
            return std::string("trigger");
          }
          if (fired) {
            absl::Status st = taker_->Snapshot("trigger");
            if (!st.ok()) return st;
          }
          absl::StatusOr<int> fresh = trigger_->Reopen(fds[i].fd);
          if (!fresh.ok() && fresh.status().code() == absl::StatusCode::kNotFound) {
            fds[i].fd = -1;  // the thread is gone
            break;
          }
          if (!fresh.ok()) return fresh.status();
          fds[i].fd = *fresh;  // in the poll set before it is armed
          absl::Status rearmed = trigger_->Rearm(*fresh);
          if (!rearmed.ok()) return rearmed;
          break;
        }
        case Kind::kWakeup:
          drain_now = true;
          // A per-thread event whose task exited polls POLLHUP for good (perf_poll):
          // drain it once more and stop polling it, or poll would return at once forever.
          if (revents & (POLLHUP | POLLERR)) fds[i].fd = -1;
          break;
      }
    }
    if (drain_now) {
      absl::Status st = taker_->Drain();
      if (!st.ok()) return st;
      next_drain = Clock::now() + drain_every;
    }
  }
}

}  // namespace ptd::pt
