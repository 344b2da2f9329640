#pragma once
// librecorder: Intel PT recording from C++ test harnesses.
//
//   ptd::RecorderConfig config;
//   config.command = {"./my-benchmark", "--iterations=10"};
//   ptd::Recorder recorder(config);
//   if (absl::Status st = recorder.Start(); !st.ok()) { ... }   // no intel_pt: clear error
//   ... wait for the interesting moment ...
//   recorder.Snapshot();            // snapshot mode: keep the newest trace now
//   recorder.Stop();
//   recorder.WriteTo("run.trace");  // a trace directory for `ptrace-direct decode`
//
// Leaving `command` empty and `pid` at -1 traces the calling thread itself (see
// TraceScope in ptd/trace_scope.h). Link ptd_recorder (CMake target) or -lptd_recorder
// plus its dependencies.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ptd {

namespace pt {
class PtRingFactory;  // the ring provider seam (tests hand in a fake kernel)
}

struct RecorderConfig {
  std::vector<std::string> command;  // launch this (argv) ...
  int pid = -1;                      // ... or attach to this process; neither: this thread
  bool snapshot = true;              // overwrite ring, newest data only; false: full trace
  // Left at both defaults, a user without CAP_IPC_LOCK gets perf's 128 KiB (the kernel's
  // locked-memory limit would refuse these).
  uint64_t snapshot_size = 4ull << 20;  // AUX bytes per ring in snapshot mode (2^n pages)
  uint64_t buffer_size = 16ull << 20;   // AUX bytes per ring in full-trace mode (2^n pages)
  bool per_thread = true;            // one ring per thread (false: per-CPU rings)
  std::string timing = "normal";     // "low", "normal" or "high"
  std::string pt_config;             // expert intel_pt fields "key=value,..."
  bool kernel = false;               // also trace the kernel
  std::string filter;                // PERF_EVENT_IOC_SET_FILTER string

  // For tests of the library itself: where to look for intel_pt, and who provides rings.
  std::string sysfs_root = "/sys";
  std::shared_ptr<pt::PtRingFactory> ring_factory;  // null: perf_event_open
};

class Recorder {
 public:
  explicit Recorder(RecorderConfig config);
  ~Recorder();  // Stop()s; a launched target is killed
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Opens the PT events and starts tracing. On a machine without Intel PT:
  // FailedPrecondition "no intel_pt PMU on this machine (AMD, VM, or old kernel); use
  // --emulate".
  absl::Status Start();
  // Snapshot mode: saves the newest trace of every ring as one chunk. Full-trace mode:
  // drains what is there (the library also drains in the background).
  absl::Status Snapshot();
  // Final snapshot (or drain) and stop. Idempotent.
  absl::Status Stop();
  // Writes the trace directory (stops first if needed). `force` replaces `dir`.
  absl::Status WriteTo(const std::string& dir, bool force = false);

  // The launched or attached process; -1 when tracing this thread.
  int target_pid() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptd
