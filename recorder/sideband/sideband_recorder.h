#pragma once
// Records the kernel's sideband for a set of threads: opens one dummy event per thread
// (per-thread mode) or per (thread, CPU) with inherit (per-CPU mode, the events of one
// CPU sharing that CPU's ring via SET_OUTPUT, as perf does), and a drain thread that
// poll()s the rings and appends their records to sideband/<tid N|cpu N>.data so long
// recordings lose nothing to a full ring. PERF_RECORD_LOST is counted per ring.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "recorder/sideband/data_ring.h"
#include "recorder/sideband/perf_event.h"
#include "recorder/sideband/perf_mmap.h"

namespace ptd {

struct SidebandRecorderOptions {
  bool per_cpu = true;               // false: one ring per thread, new threads via AddThread
  uint64_t data_size = 512ull << 10; // bytes per ring, rounded up to 2^n pages
  int clockid = -1;                  // >= 0: use_clockid (the emulator: CLOCK_MONOTONIC)
  bool enable_on_exec = false;       // launch: the target's exec enables the events
  int poll_timeout_ms = 100;         // the drain thread also drains at least this often
  // Switch records. The emulator turns them off: a single-stepped target is switched
  // out at every step, so they would be two records per instruction (megabytes for a
  // small program, most of a small trace's decode time) and say nothing about the
  // emulated schedule (virtual CPUs get synthesized ones).
  bool context_switches = true;
};

class SidebandRecorder {
 public:
  // Opens the events for `tids` (all threads of one process) and maps the rings, all
  // disabled unless enable_on_exec. Files are created in `dir` (which must outlive this).
  static absl::StatusOr<std::unique_ptr<SidebandRecorder>> Open(const std::vector<int>& tids,
                                                                const SidebandRecorderOptions& options,
                                                                const TraceDirWriter& dir);
  ~SidebandRecorder();  // Stop()s
  SidebandRecorder(const SidebandRecorder&) = delete;
  SidebandRecorder& operator=(const SidebandRecorder&) = delete;

  // Opens events for a thread that appeared later (per-thread mode: a new ring; per-CPU
  // mode: events into the existing CPU rings). Safe while the drain thread runs.
  absl::Status AddThread(int tid);

  absl::Status Enable();
  absl::Status Disable();
  // Starts the drain thread.
  absl::Status Start();
  // Stops the drain thread, drains every ring a last time and closes the files.
  // Idempotent; returns the first error seen while draining or writing (everything
  // readable was still written).
  absl::Status Stop();

  // Call after Stop(): one entry per ring for meta.json (origin kernel, lost records).
  std::vector<SidebandFile> Files() const;
  // Sums over every ring.
  DataRingStats TotalStats() const;
  // PERF_EVENT_IOC_ID of the first event (for synthesized records' sample_id).
  uint64_t first_event_id() const { return first_event_id_; }
  const SidebandRecorderOptions& options() const { return options_; }

 private:
  struct Ring;
  SidebandRecorder(const SidebandRecorderOptions& options, const TraceDirWriter& dir);
  absl::Status OpenThreadLocked(int tid);
  absl::StatusOr<Ring*> NewRingLocked(PerfEvent event, int cpu, int tid);
  absl::Status DrainAllLocked();
  void DrainLoop();

  SidebandRecorderOptions options_;
  const TraceDirWriter& dir_;
  std::vector<int> cpus_;
  size_t ring_bytes_ = 0;
  uint64_t first_event_id_ = 0;

  mutable std::mutex mu_;  // guards rings_, events_, first_error_
  std::vector<std::unique_ptr<Ring>> rings_;
  std::vector<PerfEvent> events_;  // events writing into another event's ring
  absl::Status first_error_;

  std::thread drain_thread_;
  int wake_fds_[2] = {-1, -1};  // a byte on the pipe ends poll() (stop, new ring)
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
};

// Online CPUs from /sys/devices/system/cpu/online ("0-3,6").
absl::StatusOr<std::vector<int>> OnlineCpus();

}  // namespace ptd
