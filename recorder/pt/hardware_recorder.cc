#include "recorder/pt/hardware_recorder.h"

#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "common/trace_dir.h"
#include "ptd/version.h"
#include "recorder/images/jit_files.h"
#include "recorder/pt/breakpoint_trigger.h"
#include "recorder/pt/psb_trim.h"
#include "recorder/pt/pt_recording.h"
#include "recorder/pt/record_session.h"
#include "recorder/sideband/sideband_recorder.h"  // OnlineCpus
#include "recorder/session/trigger_policy.h"

namespace ptd::pt {
namespace {

// --trim, once the streams are closed: each keeps the trace from its last PSB at or
// before the firing call's entry (meta->trigger), said in meta.json and its notes.
absl::Status TrimAtTrigger(const TraceDirWriter& dir, TraceMeta* meta) {
  // The entry's time is a breakpoint sample's: the perf clock (local_clock), which the
  // page's time_zero/mult/shift convert the TSC to. Without cap_user_time_zero (no stable
  // TSC) the PSB times cannot be put on that clock.
  if (!meta->time.cap_user_time_zero) {
    meta->notes.push_back(
        "--trim: streams kept whole: the PT event's page offers no TSC conversion "
        "(cap_user_time_zero 0), so PSB times cannot be compared with the trigger's");
    return absl::OkStatus();
  }
  const uint64_t from_ns = meta->trigger->entry_ns;
  absl::StatusOr<PsbTrimResult> result = TrimStreamsAtPsb(dir.staging_dir(), from_ns, meta);
  if (!result.ok()) {
    meta->notes.push_back(absl::StrCat("--trim failed: ", result.status().message()));
    return result.status();
  }
  meta->trigger->trimmed_from_ns = from_ns;
  meta->notes.push_back(absl::StrCat("--trim: ", result->streams_cut, " stream(s) cut at their last PSB at or before ",
                                     from_ns, " ns (", result->bytes_dropped, " bytes dropped); ",
                                     result->streams_whole, " kept whole (no PSB timed at or before it)"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HardwareRecordSummary> RecordHardware(const RecordOptions& options,
                                                     const HardwareRecordEnv& env) {
  PtRecordingOptions rec_options;
  rec_options.record = options;
  rec_options.sysfs_root = env.sysfs_root;
  rec_options.proc_root = env.proc_root;
  // Fail fast, before the target or the disk is touched.
  if (absl::StatusOr<PtPmuInfo> pmu = CheckPtRecordable(rec_options, nullptr); !pmu.ok()) {
    return pmu.status();
  }
  absl::StatusOr<TriggerSpec> trigger_spec = TriggerSpecOf(options);
  if (!trigger_spec.ok()) return trigger_spec.status();
  if (absl::Status s = CheckTriggerSymbol(options, *trigger_spec); !s.ok()) return s;
  std::unique_ptr<PtRingFactory> kernel_factory;
  PtRingFactory* factory = env.ring_factory;
  if (factory == nullptr) {
    kernel_factory = MakeKernelPtRingFactory();
    factory = kernel_factory.get();
  }
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(options.output_dir, options.force);
  if (!dir.ok()) return dir.status();

  SessionOptions session_options;
  session_options.handle_signals = env.handle_signals;
  session_options.control_fifo = options.control_fifo;
  session_options.duration_s = options.duration_s;
  session_options.multi_snapshot = options.multi_snapshot;
  session_options.trigger = *trigger_spec;
  session_options.quiet = options.quiet;
  // The session exists before the recording so the recording's SnapshotTaker can be set
  // after Start(); signals are watched from here on.
  std::unique_ptr<PtRecording> recording;
  class Forward : public SnapshotTaker {
   public:
    explicit Forward(std::unique_ptr<PtRecording>* rec) : rec_(rec) {}
    absl::Status Snapshot(const std::string& reason) override { return (*rec_)->Snapshot(reason); }
    absl::Status Drain() override { return (*rec_)->Drain(); }
    std::vector<int> WakeupFds() const override { return (*rec_)->WakeupFds(); }
    RecordCounters counters() const override { return (*rec_)->counters(); }

   private:
    std::unique_ptr<PtRecording>* rec_;
  } forward(&recording);
  RecordSession session(session_options, &forward);
  if (absl::Status st = session.Prepare(); !st.ok()) return st;

  // The trigger's breakpoints on `tids` of `pid` (and, inherited, on the threads they
  // create): before a launched target runs its first instruction, on an attached one's
  // threads once attached.
  auto set_trigger = [&](int pid, const std::vector<int>& tids) -> absl::Status {
    absl::StatusOr<uint64_t> address = ResolveSymbolInProcess(pid, options.trigger_symbol);
    if (!address.ok()) return address.status();
    absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
    if (!cpus.ok()) return cpus.status();
    absl::StatusOr<BreakpointTrigger> trigger =
        BreakpointTrigger::Create(*address, tids, *cpus, trigger_spec->slower_than_ns > 0);
    if (!trigger.ok()) return trigger.status();
    session.SetTrigger(*std::move(trigger));
    return absl::OkStatus();
  };
  if (!options.trigger_symbol.empty() && !options.command.empty()) {
    rec_options.before_run = [&](int pid) { return set_trigger(pid, {pid}); };
  }
  absl::StatusOr<std::unique_ptr<PtRecording>> started =
      PtRecording::Start(rec_options, factory, *dir);
  if (!started.ok()) return started.status();
  recording = *std::move(started);
  TargetProcess* target = recording->target();
  // A cgroup outlives its processes (and gains new ones): it is recorded until a stop
  // (Ctrl-C, --duration, the control FIFO), not until its first members exit.
  std::vector<int> watched;
  if (options.cgroup.empty()) {
    for (const auto& each : recording->targets()) watched.push_back(each->pid());
  }
  if (absl::Status st = session.WatchTargets(watched); !st.ok()) return st;
  if (!options.trigger_symbol.empty() && !target->launched()) {
    absl::StatusOr<std::vector<int>> tids = target->Threads();
    if (!tids.ok()) return tids.status();
    if (absl::Status st = set_trigger(target->pid(), *tids); !st.ok()) return st;
  }
  absl::StatusOr<std::string> end_reason = session.Run();
  HardwareRecordSummary summary;
  summary.end_reason = end_reason.ok() ? *end_reason : "error";
  std::vector<std::string> notes = session.notes();
  if (!end_reason.ok()) notes.push_back(absl::StrCat("recording error: ", end_reason.status().message()));
  const RecordCounters counters = recording->counters();
  summary.pt_bytes = counters.bytes;
  summary.snapshots = counters.snapshots;
  summary.lost_chunks = counters.lost;
  summary.rings = recording->ring_count();
  if (target->launched() && summary.end_reason == "exit") {
    absl::StatusOr<int> status = target->Wait();
    if (status.ok()) {
      summary.exit_status = *status;
      notes.push_back(absl::StrCat("target ", DescribeWaitStatus(*status)));
      if (WIFSIGNALED(*status)) summary.end_reason = "target_killed";  // as the emulators say it
    }
  }
  TraceMeta meta;
  meta.tool_version = kToolVersion;
  absl::Status finished = recording->Finish(summary.end_reason, notes, &meta);
  meta.trigger = TriggerPointOf(session.trigger_policy());
  absl::Status trimmed = absl::OkStatus();
  if (meta.trigger && trigger_spec->trim) trimmed = TrimAtTrigger(*dir, &meta);
  ArchiveJitFiles(*dir, &meta);
  recording.reset();  // unmaps and closes the events before the directory is committed
  // What was captured is committed even after an error, so it can be decoded.
  if (absl::Status st = dir->Commit(meta); !st.ok()) return st;
  summary.trace_dir = options.output_dir;
  if (!end_reason.ok()) return end_reason.status();
  if (!finished.ok()) return finished;
  if (!trimmed.ok()) return trimmed;
  return summary;
}

}  // namespace ptd::pt
