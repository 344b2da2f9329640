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
#include "recorder/sideband/proc_maps.h"
#include "recorder/sideband/proc_synth.h"
#include "recorder/sideband/sideband_recorder.h"
#include "recorder/target/target_process.h"

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
  // Opens events on every thread of each of `pids`, enables them, then reads /proc (maps,
  // thread names) for the synthesized records and dumps the vDSO, process by process.
  static absl::StatusOr<std::unique_ptr<SidebandSession>> Attach(
      const std::vector<int>& pids, const SidebandSessionOptions& options, const TraceDirWriter& dir);

  ~SidebandSession();

  // The launched process, or the first attached one.
  TargetProcess& target() { return *targets_.front().target; }
  // Every launched or attached process, in the order given.
  std::vector<TargetProcess*> targets();
  // Attach only: one more running process (one that joined a recorded cgroup): events on
  // its threads now, its /proc state synthesized at Finish like the others'.
  absl::Status AddProcess(int pid);
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
  struct Process {
    std::unique_ptr<TargetProcess> target;
    std::vector<ProcMapping> attach_maps;   // /proc at attach, for synthesis
    std::vector<ThreadComm> attach_threads;
  };
  absl::Status DumpMemory(Process& process);
  // Attach: reads the process's thread names and maps once its events exist.
  absl::Status ReadAttachState(Process& process);

  SidebandSessionOptions options_;
  const TraceDirWriter& dir_;
  std::vector<Process> targets_;  // launched: one
  std::unique_ptr<SidebandRecorder> recorder_;
  bool attached_ = false;
  uint64_t attach_clock_ns_ = 0;           // clockid reading before the events existed
  std::vector<ImageEntry> images_;
  std::vector<std::string> notes_;
  bool finished_ = false;
};

}  // namespace ptd
