#pragma once
// librecorder: recording a program from C++ test harnesses (docs/library.md).
//
//   ptd::RecorderConfig config;
//   config.command = {"./my-benchmark", "--iterations=10"};
//   config.snapshot = false;                // full trace
//   ptd::Recorder recorder(config);         // backend kAuto: PT, else Valgrind, else ptrace
//   if (absl::Status st = recorder.Start(); !st.ok()) { ... }   // a Status, never an abort
//   absl::StatusOr<int> exit_code = recorder.Wait();             // the command exits
//   recorder.WriteTo("run.trace");  // a trace directory for ptd::DecodeSummary (ptd/decoder.h)
//
// Leaving `command` and `pids` empty traces the calling thread itself (see
// TraceScope in ptd/trace_scope.h); only Intel PT hardware can do that. CMake:
// find_package(ptrace_direct) and link ptd::recorder; pkg-config: ptrace-direct.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ptd {

namespace pt {
class PtRingFactory;  // the ring provider seam (tests hand in a fake kernel)
}

// How the recording is made. Every backend writes the same trace directory format.
enum class Backend {
  kAuto,      // Intel PT when the machine has it, else Valgrind when built and installed,
              // else ptrace (tracing the calling thread: Intel PT only)
  kHardware,  // Intel PT through perf_event_open: full speed; needs an Intel CPU with PT
  kValgrind,  // emulation under Valgrind (its ptd tool installed): slower than PT, any x86-64
  kPtrace,    // emulation by ptrace single-stepping: tens of thousands of instructions
              // per second, any x86-64 Linux that allows ptrace
};
// "auto", "hardware", "valgrind", "ptrace".
const char* BackendName(Backend backend);

struct RecorderConfig {
  Backend backend = Backend::kAuto;
  std::vector<std::string> command;  // launch this (argv) ...
  std::vector<int> pids;             // ... or attach to these processes; neither: this thread
  bool snapshot = true;              // overwrite ring, newest data only; false: full trace
  // Left at both defaults, a user without CAP_IPC_LOCK gets perf's 128 KiB (the kernel's
  // locked-memory limit would refuse these).
  uint64_t snapshot_size = 4ull << 20;  // AUX bytes per ring in snapshot mode (2^n pages)
  uint64_t buffer_size = 16ull << 20;   // AUX bytes per ring in full-trace mode (2^n pages)
  bool per_thread = true;            // one ring per thread (false: per-CPU rings; hardware)
  std::string timing = "normal";     // "low", "normal" or "high"
  std::string pt_config;             // expert intel_pt fields "key=value,..." (hardware)
  bool kernel = false;               // also trace the kernel (hardware)
  std::string filter;                // PERF_EVENT_IOC_SET_FILTER string (hardware)
  // Copy the mapped files into the trace by build-id (false: as `record --no-archive`;
  // the trace then decodes only while the binaries stay as they were).
  bool archive = true;

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

  // Checks the config (InvalidArgument naming the field), picks the backend
  // (FailedPrecondition naming it when it cannot work here, e.g. kHardware without Intel
  // PT: "... no intel_pt PMU on this machine ..."), launches or attaches to the target
  // and starts tracing. The emulation backends record on a thread of the library; their
  // errors after Start (the target could not be traced) come from Wait/Stop/WriteTo.
  absl::Status Start();
  // Blocks until the launched command exits and returns its exit code, or 128 + signal number when a signal killed it. Fails for an
  // attached process (RecorderConfig::pid) or a recording that failed. The emulation
  // backends end the recording when the command exits; hardware keeps the trace in its
  // rings until Stop (which snapshot mode needs to save it).
  absl::StatusOr<int> Wait();
  // Snapshot mode: saves the newest trace of every ring as one chunk. Full-trace mode:
  // drains what is there (the library also drains in the background).
  absl::Status Snapshot();
  // Final snapshot (or drain) and stop. Idempotent.
  absl::Status Stop();
  // Writes the trace directory (stops first if needed). `force` replaces `dir`.
  absl::Status WriteTo(const std::string& dir, bool force = false);

  // The launched process, or the first of `pids`; -1 when tracing this thread (or, with
  // an emulation backend, not yet known).
  int target_pid() const;
  // The backend Start() chose (kAuto before Start); why kAuto passed over the others.
  Backend backend() const;
  const std::string& backend_choice() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptd
