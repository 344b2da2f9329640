#include "recorder/pt/record_session.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <algorithm>
#include <optional>
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
  for (int fd : pidfds_) close(fd);
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

absl::Status RecordSession::WatchTargets(const std::vector<int>& pids) {
  for (int fd : pidfds_) close(fd);
  pidfds_.clear();
  for (int pid : pids) {
    long fd = syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) return ErrnoError("pidfd_open", absl::StrCat("process ", pid), errno);
    pidfds_.push_back(static_cast<int>(fd));
  }
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

std::vector<std::string> RecordSession::notes() const {
  std::vector<std::string> notes = notes_;
  if (trigger_) notes.push_back(trigger_policy_.Describe(trigger_->address()));
  return notes;
}

absl::StatusOr<bool> RecordSession::OnTriggerHits(std::vector<BreakpointHit> hits,
                                                 const std::function<void(int fd)>& poll_fd) {
  // Entries and returns come from different rings: the policy wants them in time order.
  std::stable_sort(hits.begin(), hits.end(),
                   [](const BreakpointHit& a, const BreakpointHit& b) { return a.time < b.time; });
  bool fired = false;
  for (const BreakpointHit& hit : hits) {
    std::optional<TriggerFiring> firing;
    if (hit.at_return) {
      firing = trigger_policy_.OnStack(hit.tid, hit.stack_pointer, hit.time);
    } else {
      firing = trigger_policy_.OnEntry(hit.pid, hit.tid, hit.stack_pointer, hit.time);
      if (trigger_policy_.watches_returns() && hit.return_address != 0) {
        absl::StatusOr<int> fd = trigger_->WatchReturn(hit.tid, hit.return_address);
        if (fd.ok() && *fd >= 0) poll_fd(*fd);
        // Out of debug registers (more than three call sites in a thread): that site's
        // calls are not timed; said once.
        if (!fd.ok() && return_sites_failed_++ == 0) notes_.push_back(std::string(fd.status().message()));
      }
    }
    fired = fired || firing.has_value();
  }
  if (!fired) return false;
  if (!options_.multi_snapshot) {
    notes_.push_back(absl::StrFormat("trigger hit at 0x%x", trigger_->address()));
    absl::Status st = Finish("trigger");
    if (!st.ok()) return st;
    return true;
  }
  absl::Status st = taker_->Snapshot("trigger");
  if (!st.ok()) return st;
  return false;
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
  for (int fd : pidfds_) add(fd, Kind::kTarget);
  size_t targets_running = pidfds_.size();
  if (trigger_) {
    for (int fd : trigger_->fds()) add(fd, Kind::kTrigger);
  }
  // The ring fds follow the taker's list after each drain: rings opened by a drain (new
  // threads, followed children) join the poll set, dropped rings leave it (their fd
  // numbers may come back for new events). An fd that hung up stays out while listed.
  std::vector<int> hung_up;
  auto update_wakeup_fds = [&] {
    const std::vector<int> listed = taker_->WakeupFds();
    auto is_listed = [&](int fd) { return std::find(listed.begin(), listed.end(), fd) != listed.end(); };
    std::erase_if(hung_up, [&](int fd) { return !is_listed(fd); });
    for (size_t i = 0; i < fds.size();) {
      if (kinds[i] == Kind::kWakeup && !is_listed(fds[i].fd)) {
        fds.erase(fds.begin() + static_cast<ptrdiff_t>(i));
        kinds.erase(kinds.begin() + static_cast<ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    for (int fd : listed) {
      if (std::find(hung_up.begin(), hung_up.end(), fd) != hung_up.end()) continue;
      bool polled = false;
      for (size_t i = 0; i < fds.size(); ++i) polled = polled || (kinds[i] == Kind::kWakeup && fds[i].fd == fd);
      if (!polled) add(fd, Kind::kWakeup);
    }
  };
  update_wakeup_fds();

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
    std::vector<BreakpointHit> round_hits;
    bool target_exited = false;
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
        case Kind::kTarget:
          // A pidfd stays readable once its process has exited: stop polling it. The
          // recording ends after the trigger hits of this round (they happened before).
          fds[i].fd = -1;
          target_exited = --targets_running == 0;
          break;
        case Kind::kTrigger: {
          absl::StatusOr<std::vector<BreakpointHit>> hits = trigger_->TakeHits(fds[i].fd);
          if (!hits.ok()) return hits.status();
          // Hung up without a hit: its thread is gone. Stop polling it.
          if (hits->empty() && (revents & (POLLHUP | POLLERR))) fds[i].fd = -1;
          round_hits.insert(round_hits.end(), hits->begin(), hits->end());
          break;
        }
        case Kind::kWakeup:
          drain_now = true;
          // An event whose task exited polls POLLHUP for good (perf_poll, is_event_hup):
          // drain it once more and stop polling it, or poll would return at once forever.
          // Only that event: the ring's other events still wake us.
          if (revents & (POLLHUP | POLLERR | POLLNVAL)) {
            hung_up.push_back(fds[i].fd);
            fds[i].fd = -1;
          }
          break;
      }
    }
    if (!round_hits.empty()) {
      absl::StatusOr<bool> stop = OnTriggerHits(std::move(round_hits), [&](int fd) { add(fd, Kind::kTrigger); });
      if (!stop.ok()) return stop.status();
      if (*stop) return std::string("trigger");
    }
    if (target_exited) {
      absl::Status st = Finish("exit");
      if (!st.ok()) return st;
      return std::string("exit");
    }
    if (drain_now) {
      absl::Status st = taker_->Drain();
      if (!st.ok()) return st;
      next_drain = Clock::now() + drain_every;
      update_wakeup_fds();
    }
  }
}

}  // namespace ptd::pt
