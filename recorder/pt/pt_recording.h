#pragma once
// One hardware (Intel PT) recording: discovers the PMU, builds the event, launches or
// attaches to the target, opens the rings through a PtRingFactory (the kernel, or a fake
// in tests), and implements SnapshotTaker so RecordSession (CLI) or ptd::Recorder (API)
// can drive it. Finish() describes everything in a TraceMeta for the trace directory.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "recorder/pt/perf_access.h"
#include "recorder/pt/perf_clock.h"
#include "recorder/pt/pt_event_config.h"
#include "recorder/pt/pt_pmu.h"
#include "recorder/pt/pt_ring_factory.h"
#include "recorder/pt/pt_stream_capture.h"
#include "recorder/pt/record_session.h"
#include "recorder/session/record_options.h"
#include "recorder/target/target_process.h"

namespace ptd::pt {

struct PtRecordingOptions {
  RecordOptions record;
  std::string sysfs_root = "/sys";   // where intel_pt is looked for (tests: a fake tree)
  std::string proc_root = "/proc";   // perf_event_paranoid, capabilities
  // Self-tracing (ptd::TraceScope): trace these threads of this process; no launch or
  // attach, no exit watch. Empty: use record.command / record.pids / record.cgroup.
  std::vector<int> self_tids;
  // Launched targets: runs once the target is stopped right after exec (its image
  // mapped, nothing run yet), before it goes on: the trigger's breakpoints go in here
  // so no hit is missed. An error ends Start with it.
  std::function<absl::Status(int pid)> before_run;
  // perf clock - CLOCK_MONOTONIC, for when the first ring's page offers no TSC conversion
  // (VMs without a stable TSC). Tests substitute a failing probe.
  std::function<absl::StatusOr<int64_t>()> measure_perf_clock_offset = MeasurePerfClockOffset;
};

// Checks what can be checked before touching the target or the disk: the PMU (the exact
// "no intel_pt PMU ..." message when absent), perf permissions, the event config and the
// ring sizes. FailedPrecondition / InvalidArgument: the CLI exits 2.
absl::StatusOr<PtPmuInfo> CheckPtRecordable(const PtRecordingOptions& options,
                                            PtEventConfig* config_out);

class PtRecording : public SnapshotTaker {
 public:
  // `factory` and `dir` must outlive the recording. The target runs (launch: released
  // past exec; attach: events enabled) when this returns.
  static absl::StatusOr<std::unique_ptr<PtRecording>> Start(const PtRecordingOptions& options,
                                                            PtRingFactory* factory,
                                                            const TraceDirWriter& dir);
  ~PtRecording() override;

  absl::Status Snapshot(const std::string& reason) override;
  absl::Status Drain() override;
  std::vector<int> WakeupFds() const override;
  RecordCounters counters() const override;

  // Closes the files and fills `meta` (everything but tool_version). Call once, after
  // the last Snapshot/Drain.
  absl::Status Finish(const std::string& end_reason, const std::vector<std::string>& notes,
                      TraceMeta* meta);

  // The launched process or the first attached one; null when self-tracing.
  TargetProcess* target() { return targets_.empty() ? nullptr : targets_.front().get(); }
  // Every launched or attached process (--cgroup: its members at the start).
  const std::vector<std::unique_ptr<TargetProcess>>& targets() const { return targets_; }
  const PtEventConfig& config() const { return config_; }
  size_t ring_count() const { return captures_.size(); }

 private:
  PtRecording(PtRecordingOptions options, PtRingFactory* factory, const TraceDirWriter& dir);
  // The rings' common request: attr_, tracking_attr_ and the ring sizes.
  PtRingRequest RingRequest() const;
  absl::Status OpenRings(const std::vector<int>& tids);
  // --cgroup: one ring per online CPU whose events count the cgroup's tasks there.
  absl::Status OpenCgroupRings(const std::string& cgroup);
  // A ring opened: its files created, its capture kept.
  absl::Status AddCapture(std::unique_ptr<PtRingSource> ring);
  // The events' clock now (EventClockNow of the first ring).
  uint64_t Now() const;
  // Linear mode, after `capture` was read: PERF_EVENT_IOC_ENABLE when that read found a
  // truncation (lost_chunks() moved past `lost_before`), lost sideband, or a full ring.
  absl::Status EnableAfterTruncation(PtStreamCapture& capture, uint64_t lost_before,
                                     uint64_t sideband_lost_before, uint64_t full_reads_before);
  // Events for the tasks the sideband reported as created, where inheritance does not
  // follow them: per-thread mode, a ring for each new thread of a traced process and,
  // unless --no-follow, for each child process (which is traced from then on); per-CPU
  // mode with --no-follow (inherit=0), the new threads' events added to every ring.
  absl::Status FollowNewTasks();
  // Per-thread mode: a ring for a running thread, enabled. NotFound when it is gone.
  absl::Status OpenThreadRing(int tid);
  // Per-CPU mode: `tid`'s events added to every ring and enabled. NotFound when it is gone.
  absl::Status AddThreadToCpuRings(int tid);
  // Per-thread mode: whether every event of `capture`'s ring hung up (its thread exited:
  // is_event_hup). The kernel published the thread's last trace when it stopped.
  static bool ThreadExited(PtStreamCapture& capture);
  // Closes captures_[i] and drops its ring (munmap: the user's locked memory comes
  // back, its fds close); what it wrote stays listed for Finish.
  absl::Status RetireCapture(size_t i);
  // Whether `pid` is launched, attached or a followed child.
  bool IsTracedProcess(int pid) const;
  absl::Status DumpTargetMemory(int pid);
  // An attached (or cgroup) process's mappings and thread names from /proc, stamped
  // `time_ns`, into sideband/synth.PID.data; its vDSO dumped.
  absl::Status DescribeRunningProcess(int pid, uint64_t time_ns);
  // --cgroup, at each drain: processes that joined since the last look are described
  // (their events exist already: the cgroup's), so their tracks are named.
  void DescribeCgroupNewcomers();

  PtRecordingOptions options_;
  PtRingFactory* factory_;
  const TraceDirWriter& dir_;
  PtPmuInfo pmu_;
  PtEventConfig config_;
  std::vector<std::unique_ptr<TargetProcess>> targets_;
  std::vector<std::unique_ptr<PtStreamCapture>> captures_;
  // Rings of exited threads, dropped (per-thread mode): their streams and sideband files.
  std::vector<PtStream> retired_streams_;
  std::vector<SidebandFile> retired_sideband_;
  perf_event_attr attr_{};           // the PT event as opened (per-thread rings added later)
  perf_event_attr tracking_attr_{};  // the sideband (dummy) event beside it
  std::vector<int> traced_tids_;     // threads with a ring (per-thread), or added while recording
  std::vector<int> target_pids_;  // the launched or attached processes (--cgroup: seen in it)
  std::vector<int> child_pids_;   // per-thread mode: children followed from their FORK
  uint64_t cgroup_read_ns_ = 0;   // --cgroup: when cgroup.procs was last read
  std::vector<SidebandFile> extra_sideband_;  // synthesized at attach
  std::vector<ImageEntry> images_;
  std::vector<std::string> notes_;
  TimeConversion time_;
  // The first ring's time conversion (fixed for the event's life), for Now().
  perf_event_mmap_page clock_page_{};
  bool clock_page_set_ = false;
  int64_t clock_offset_ = 0;  // perf clock - CLOCK_MONOTONIC, without a TSC conversion
  uint64_t snapshots_ = 0;
  uint64_t start_ns_ = 0;
  bool finished_ = false;
};

}  // namespace ptd::pt
