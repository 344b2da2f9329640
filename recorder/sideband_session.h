#pragma once
// "Record the sideband of a target into a trace directory": launch (-- CMD) or attach
// (--pid), kernel sideband through SidebandRecorder, /proc synthesis at attach, the vDSO
// dump, and at the end the meta.json parts that describe all of it. Used by the tests,
// the emulation backend and any mode whose PT event does not carry sideband itself.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "recorder/proc_maps.h"
#include "recorder/proc_synth.h"
#include "recorder/sideband_recorder.h"
#include "recorder/target_process.h"

namespace ptd {

struct SidebandSessionOptions {
  SidebandRecorderOptions sideband;
  // Launch only: leave the child ptrace-stopped right after exec (SIGTRAP) for a tracer
  // in this thread (the emulator); otherwise it is detached and runs freely.
  bool keep_traced = false;
};

class SidebandSession {
 public:
  // Forks `argv` held before exec, opens the sideband events on it with enable_on_exec,
  // lets it exec and stops it there (PTRACE_TRACEME, so the vDSO of the new image can be
  // dumped before it runs), dumps the vDSO, then (unless keep_traced) detaches.
  static absl::StatusOr<std::unique_ptr<SidebandSession>> Launch(
      const std::vector<std::string>& argv, const SidebandSessionOptions& options,
      const TraceDirWriter& dir);
  // Opens events on every thread of `pid`, enables them, then reads /proc (maps, thread
  // names) for the synthesized records and dumps the vDSO.
  static absl::StatusOr<std::unique_ptr<SidebandSession>> Attach(
      int pid, const SidebandSessionOptions& options, const TraceDirWriter& dir);

  ~SidebandSession();

  TargetProcess& target() { return *target_; }
  SidebandRecorder& recorder() { return *recorder_; }
  // A thread the caller saw appear (per-thread mode).
  absl::Status AddThread(int tid) { return recorder_->AddThread(tid); }

  // Stops recording (last drain), writes the synthesized records (stamped 1 ns before the
  // first real record) and fills `meta`: command, pids, host, per, sideband[], images[],
  // notes[], start_ns/end_ns. Recording errors become notes and the status; whatever was
  // captured is still described so the caller can commit it.
  absl::Status Finish(TraceMeta* meta);

 private:
  SidebandSession(const SidebandSessionOptions& options, const TraceDirWriter& dir);
  absl::Status DumpMemory();

  SidebandSessionOptions options_;
  const TraceDirWriter& dir_;
  std::unique_ptr<TargetProcess> target_;
  std::unique_ptr<SidebandRecorder> recorder_;
  bool attached_ = false;
  std::vector<ProcMapping> attach_maps_;   // /proc at attach, for synthesis
  std::vector<ThreadComm> attach_threads_;
  uint64_t attach_clock_ns_ = 0;           // clockid reading before the events existed
  std::vector<ImageEntry> images_;
  std::vector<std::string> notes_;
  bool finished_ = false;
};

}  // namespace ptd
