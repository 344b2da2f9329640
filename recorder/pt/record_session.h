#pragma once
// The record loop: waits on everything that can ask for a snapshot or an end (signals,
// the control FIFO, trigger breakpoints, the target's exit, the duration, ring wake-ups)
// and tells a SnapshotTaker what to do. It knows nothing about PT, so it is tested here
// with a recording taker, real signals, a real FIFO and real breakpoints.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recorder/pt/breakpoint_trigger.h"
#include "recorder/session/control_fifo.h"
#include "recorder/pt/signal_watcher.h"
#include "recorder/pt/status_line.h"
#include "recorder/session/trigger_policy.h"

namespace ptd::pt {

// What the loop drives: the PT rings on hardware, a list of calls in tests.
class SnapshotTaker {
 public:
  virtual ~SnapshotTaker() = default;
  // Saves the newest trace as a chunk tagged `reason` ("sigint", "sigusr2", "control",
  // "exit", "trigger", "duration", "sigterm"); in linear mode, drains with that tag.
  virtual absl::Status Snapshot(const std::string& reason) = 0;
  // Periodic / wake-up read: sideband always, AUX in linear mode.
  virtual absl::Status Drain() = 0;
  // fds that become readable when the kernel wants a drain (aux_watermark); may be empty.
  virtual std::vector<int> WakeupFds() const = 0;
  virtual RecordCounters counters() const = 0;
};

struct SessionOptions {
  bool handle_signals = true;    // SIGINT/SIGTERM: final snapshot and stop; SIGUSR2: snapshot
  std::string control_fifo;      // empty: none
  double duration_s = 0;         // 0: no limit
  bool multi_snapshot = false;   // keep going after a trigger snapshot
  // Which breakpoint hit fires (--trigger-after); the policy every backend shares.
  TriggerSpec trigger;
  int drain_interval_ms = 100;   // periodic Drain() when no wake-up fd fires
  bool quiet = false;            // status line off
};

class RecordSession {
 public:
  RecordSession(SessionOptions options, SnapshotTaker* taker);
  ~RecordSession();

  // Sets up signals and the control FIFO. Call before starting the target's trace so a
  // Ctrl-C right away is already a clean stop.
  absl::Status Prepare();
  // The processes whose exit ends the recording (pidfds): "exit" once every one of them
  // has exited. Empty: none.
  absl::Status WatchTargets(const std::vector<int>& pids);
  // Takes ownership; options.trigger says which hits fire.
  void SetTrigger(BreakpointTrigger trigger);

  // Runs until a stop condition; returns end_reason ("exit", "sigint", "sigterm",
  // "duration", "control", "trigger") after the final snapshot / drain.
  absl::StatusOr<std::string> Run();

  // Notes for meta.json (unknown control commands, the trigger's account, ...).
  std::vector<std::string> notes() const;
  // What the trigger saw and which call fired it.
  const TriggerPolicy& trigger_policy() const { return trigger_policy_; }

 private:
  absl::Status Finish(const std::string& reason);
  // The breakpoint hits of one poll round: feeds the policy, watches new return sites
  // (poll_fd adds their fds), snapshots; true when the recording ends on the trigger.
  absl::StatusOr<bool> OnTriggerHits(std::vector<BreakpointHit> hits, const std::function<void(int fd)>& poll_fd);

  SessionOptions options_;
  SnapshotTaker* taker_;
  std::unique_ptr<SignalWatcher> signals_;
  std::unique_ptr<ControlFifo> control_;
  std::unique_ptr<BreakpointTrigger> trigger_;
  TriggerPolicy trigger_policy_;
  uint64_t return_sites_failed_ = 0;
  std::vector<int> pidfds_;
  std::vector<std::string> notes_;
  StatusLine status_line_;
};

}  // namespace ptd::pt
