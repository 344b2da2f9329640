#include "recorder/emulate/emulated_recorder.h"

#include <errno.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "recorder/ptgen/emulated_pt_settings.h"
#include "recorder/session/emulation_control.h"
#include "recorder/images/jit_capture.h"
#include "recorder/emulate/ground_truth_writer.h"
#include "recorder/emulate/ptrace_stepper.h"
#include "recorder/emulate/sideband_rewrite.h"
#include "recorder/ptgen/pt_stream_set.h"
#include "recorder/sideband/proc_maps.h"
#include "recorder/images/elf_symbol.h"
#include "recorder/sideband/sideband_session.h"
#include "recorder/target/target_process.h"
#include "recorder/images/trace_archive.h"
#include "recorder/session/trigger_policy.h"
#include "sideband/record_reader.h"

namespace ptd {
namespace {


absl::Status CheckPtraceEmulationOptions(const RecordOptions& options) {
  if (absl::Status s = CheckTargetOptions(options); !s.ok()) return s;
  if ((options.pids.size() > 1 || !options.cgroup.empty()) && !options.start_at_symbol.empty()) {
    // The breakpoint's address is the symbol's in one process (ASLR).
    return absl::InvalidArgumentError(
        "record --emulate: --start-at needs one target process (not several --pid, nor --cgroup)");
  }
  if (options.virtual_cpus < 0 || options.virtual_cpus > 256) {
    return absl::InvalidArgumentError("record --emulate: --virtual-cpus must be 0..256");
  }
  if (options.emulate_overflow_every > 0 && options.virtual_cpus > 0) {
    // The lost stretch would have to follow the threads switched on the virtual CPU.
    return absl::InvalidArgumentError(
        "record --emulate: --emulate-overflow-every works in per-thread mode only (not with --virtual-cpus)");
  }
  if (options.snapshot && options.snapshot_size < 4096) {
    return absl::InvalidArgumentError("record --emulate: --snapshot-size must be at least 4096 bytes");
  }
  if (options.trim && options.virtual_cpus > 0) {
    return absl::InvalidArgumentError("record --emulate: --trim works in per-thread mode only (not with --virtual-cpus)");
  }
  return absl::OkStatus();
}

// The kernel's sideband (mmaps, forks, exits, comm) of the launched or attached targets
// (`attach`), which stay ptrace-stopped for the stepper.
absl::StatusOr<std::unique_ptr<SidebandSession>> StartSidebandSession(const RecordOptions& options,
                                                                      const std::vector<int>& attach,
                                                                      TraceDirWriter& dir) {
  SidebandSessionOptions session_options;
  session_options.sideband.per_cpu = true;  // inherit: new threads and children followed
  session_options.sideband.clockid = CLOCK_MONOTONIC;
  session_options.sideband.context_switches = false;  // one per single step otherwise
  session_options.sideband.data_size = options.data_size;
  session_options.keep_traced = true;
  std::unique_ptr<SidebandSession> session;
  if (!options.command.empty()) {
    session_options.sideband.enable_on_exec = true;
    absl::StatusOr<std::unique_ptr<SidebandSession>> launched =
        SidebandSession::Launch(options.command, session_options, dir);
    if (!launched.ok()) return launched.status();
    session = std::move(*launched);
  } else {
    absl::StatusOr<std::unique_ptr<SidebandSession>> attached =
        SidebandSession::Attach(attach, session_options, dir);
    if (!attached.ok()) return attached.status();
    session = std::move(*attached);
  }
  return session;
}

// --start-at and --trigger: symbol addresses in the target, asked for again until found.
void SetSymbolResolvers(const RecordOptions& options, int pid, PtraceStepperOptions* stepper_options) {
  if (!options.start_at_symbol.empty()) {
    // In the executable (or any file mapped at exec) now; else in a library once it is
    // mapped (the stepper asks again after every mmap).
    const std::string symbol = options.start_at_symbol;
    stepper_options->resolve_start = [pid, symbol]() -> absl::StatusOr<uint64_t> {
      absl::StatusOr<uint64_t> address = ResolveSymbolInProcess(pid, symbol);
      if (!address.ok()) return address;
      // ld.so maps a library read-only first and its code segment over that later
      // (MAP_FIXED), which would discard an int3 planted too early.
      absl::StatusOr<std::vector<ProcMapping>> maps = ReadProcMaps(pid);
      if (!maps.ok()) return maps.status();
      for (const ProcMapping& m : *maps) {
        if (*address >= m.start && *address < m.end && m.executable()) return address;
      }
      return absl::NotFoundError(absl::StrCat(symbol, ": not in executable memory yet"));
    };
  }
  if (!options.trigger_symbol.empty()) {
    const std::string symbol = options.trigger_symbol;
    stepper_options->resolve_trigger = [pid, symbol]() -> absl::StatusOr<uint64_t> {
      return ResolveSymbolInProcess(pid, symbol);
    };
  }
}

// Attaches to every thread of the running process `target`, each stopped here.
absl::Status AttachProcessThreads(const TargetProcess& target, PtraceStepper& stepper) {
  const int pid = target.pid();
  absl::StatusOr<std::vector<int>> tids = target.Threads();
  if (!tids.ok()) return tids.status();
  for (int tid : *tids) {
    // Seized, not PTRACE_ATTACHed: no SIGSTOP is sent (a stop the program could see), and
    // PTRACE_INTERRUPT can stop the thread later while it is blocked in a system call.
    if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) return PtraceAttachError(errno, pid, tid);
    if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) return PtraceAttachError(errno, pid, tid);
    int status = 0;
    while (true) {
      pid_t waited;
      do {
        waited = waitpid(tid, &status, __WALL);
      } while (waited < 0 && errno == EINTR);  // Ctrl-C / SIGTERM during the attach: served once attached
      if (waited != tid || !WIFSTOPPED(status)) {
        return absl::NotFoundError(absl::StrFormat(
            "thread %d of process %d did not stop after attach (it exited during the attach?)", tid, pid));
      }
      if ((status >> 16) == PTRACE_EVENT_STOP) break;
      // A signal arrived before the interrupt: delivered as it would have been, untraced.
      ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(WSTOPSIG(status))));
    }
    if (absl::Status s = stepper.AddStoppedThread(pid, tid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Launched: the target is stopped at exec. Attached: every thread of every process is
// stopped here.
absl::Status AddTargetThreads(const RecordOptions& options, SidebandSession& session, int pid,
                              PtraceStepper& stepper) {
  if (!options.command.empty()) return stepper.AddStoppedThread(pid, pid);
  for (TargetProcess* target : session.targets()) {
    if (absl::Status s = AttachProcessThreads(*target, stepper); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// --cgroup: the processes that joined the cgroup since the last look (and are not traced
// yet, as children of a traced process are) are attached to, sideband and threads.
void AttachCgroupNewcomers(const std::string& cgroup, SidebandSession& session, PtraceStepper& stepper,
                           std::vector<std::string>* notes) {
  absl::StatusOr<std::vector<int>> pids = CgroupProcesses(cgroup);
  if (!pids.ok()) return;  // emptied or removed: nothing to add
  for (int pid : *pids) {
    // A child of a traced process is traced already (TracerPid is us even before the
    // stepper has seen its parent's fork event).
    if (stepper.TracesProcess(pid) || TracerPid(pid) == getpid()) continue;
    // One that was attached and whose threads are gone is in the session: not twice.
    bool known = false;
    for (TargetProcess* target : session.targets()) known = known || target->pid() == pid;
    if (known) continue;
    absl::Status st = session.AddProcess(pid);
    if (st.ok()) st = AttachProcessThreads(*session.targets().back(), stepper);
    notes->push_back(st.ok() ? absl::StrCat("process ", pid, " joined ", cgroup, " while recording: traced from then on")
                             : absl::StrCat("process ", pid, " joined ", cgroup, " but was not traced: ", st.message()));
  }
}

// What `info` shows about the run: how the target ended, the stepper's counts, triggers.
void AddRunNotes(const RecordOptions& options, int pid, const PtraceStepper& stepper, const PtStreamSet& streams,
                 const TriggerPolicy& trigger, const std::vector<std::string>& request_notes, TraceMeta* meta) {
  // How the target ended, for `info` (docs/robustness.md).
  for (int target : meta->pids) {
    const int target_status = stepper.exit_status(target);
    if (target_status < 0) continue;
    meta->notes.push_back(absl::StrCat("target process ", target, " ", DescribeWaitStatus(target_status)));
    if (target == pid && WIFSIGNALED(target_status) && meta->end_reason == "exit") meta->end_reason = "target_killed";
  }
  const PtraceStepperStats& stats = stepper.stats();
  meta->notes.push_back(absl::StrFormat(
      "emulated with ptrace single-stepping: %u steps, %u instructions, %u threads, %.1f s "
      "(%.0f steps/s)",
      stats.steps, stats.instructions, stats.threads, stats.seconds,
      stats.seconds > 0 ? static_cast<double>(stats.steps) / stats.seconds : 0.0));
  if (stats.undecodable > 0) {
    meta->notes.push_back(absl::StrFormat(
        "%u executed instructions could not be decoded (Zydis); they were traced as "
        "non-branches", stats.undecodable));
  }
  if (options.emulate_overflow_every > 0) {
    meta->notes.push_back(absl::StrFormat(
        "--emulate-overflow-every %u: %u overflows injected, %u executed instructions lost "
        "to them (not in the trace)", options.emulate_overflow_every, streams.stats().overflows,
        stats.lost_instructions));
  }
  if (!options.trigger_symbol.empty()) {
    meta->notes.push_back(stepper.trigger_address() == 0
                             ? absl::StrCat("--trigger ", options.trigger_symbol, ": never resolved")
                             : trigger.Describe(stepper.trigger_address()));
  }
  meta->notes.insert(meta->notes.end(), request_notes.begin(), request_notes.end());
  if (!options.start_at_symbol.empty() && !stats.start_reached) {
    meta->notes.push_back(absl::StrCat("--start-at ", options.start_at_symbol,
                                      ": never reached; nothing was traced"));
  }
}

// The kernel's sideband files (and what was synthesized from /proc at an attach) as the
// session listed them in `meta`: their times onto the trace's axis (virtual time), and in
// per-CPU emulation without the kernel's context switches, which describe the real CPUs,
// not the virtual ones the PT streams were generated for (the decoder's CPU schedule then
// comes only from the synthesized records).
void RewriteKernelSideband(const TraceDirWriter& dir, StepperClock& clock, bool virtual_cpus, TraceMeta* meta) {
  const bool retime = !clock.wall();
  if (!retime && !virtual_cpus) return;
  RewrittenTimes range;
  for (const SidebandFile& file : meta->sideband) {
    SidebandRewrite rewrite;
    rewrite.drop_switches = virtual_cpus && file.origin == "kernel";
    if (retime) {
      // What /proc showed at an attach is the state before the first instruction, whatever
      // its stamp (the session puts it just before the first kernel record, maybe an exit).
      const bool state_at_start = file.origin == "synthesized";
      rewrite.retime = [&clock, state_at_start](int pid, int tid, uint64_t time) {
        return clock.ToVirtual(pid, tid, state_at_start ? 0 : time);
      };
    }
    absl::StatusOr<RewrittenTimes> times =
        RewriteSidebandFile(dir.FilePath(file.file), RecordFormat{file.sample_type, file.sample_id_all}, rewrite);
    if (!times.ok()) {
      meta->notes.push_back(absl::StrCat("could not rewrite ", file.file, ": ", times.status().message()));
      continue;
    }
    range.first = std::min(range.first, times->first);
    range.last = std::max(range.last, times->last);
  }
  if (retime) {
    // The session's span was of the real times.
    meta->start_ns = range.first <= range.last ? range.first : clock.Newest();
    meta->end_ns = range.first <= range.last ? range.last : 0;
  }
  if (virtual_cpus) {
    meta->notes.push_back(
        "virtual CPUs: the kernel's context-switch records were dropped; sideband/vcpu*.data "
        "hold the synthesized schedule of the virtual CPUs");
  }
}

EmulatedRecordSummary SummaryOf(const RecordOptions& options, int pid, const PtraceStepper& stepper,
                                const PtStreamSet& streams, uint64_t trigger_hits, const std::string& end_reason) {
  EmulatedRecordSummary summary;
  const PtraceStepperStats& stats = stepper.stats();
  summary.trace_dir = options.output_dir;
  summary.steps = stats.steps;
  summary.instructions = stats.instructions;
  summary.pt_bytes = streams.stats().bytes;
  summary.overflows = streams.stats().overflows;
  summary.lost_instructions = stats.lost_instructions;
  summary.threads = stats.threads;
  summary.undecodable = stats.undecodable;
  summary.signals_delivered = stats.signals_delivered;
  summary.snapshots = streams.stats().snapshots;
  summary.trigger_hits = trigger_hits;
  summary.seconds = stats.seconds;
  summary.end_reason = end_reason;
  const int status = stepper.exit_status(pid);
  if (status >= 0) summary.exit_status = ShellExitCode(status);
  return summary;
}

}  // namespace

absl::StatusOr<EmulatedRecordSummary> RecordEmulated(const RecordOptions& options) {
  if (absl::Status s = CheckPtraceEmulationOptions(options); !s.ok()) return s;
  absl::StatusOr<TriggerSpec> trigger_spec = TriggerSpecOf(options);
  if (!trigger_spec.ok()) return trigger_spec.status();
  if (absl::Status s = CheckTriggerSymbol(options, *trigger_spec); !s.ok()) return s;
  absl::StatusOr<std::vector<int>> attach = ProcessesToAttach(options);
  if (!attach.ok()) return attach.status();
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(options.output_dir, options.force);
  if (!dir.ok()) return dir.status();

  std::optional<GroundTruthWriter> truth;
  if (!options.ground_truth_path.empty()) {
    absl::StatusOr<GroundTruthWriter> writer = GroundTruthWriter::Create(options.ground_truth_path);
    if (!writer.ok()) return writer.status();
    truth.emplace(std::move(*writer));
  }
  absl::StatusOr<std::unique_ptr<SidebandSession>> started = StartSidebandSession(options, *attach, *dir);
  if (!started.ok()) return started.status();
  std::unique_ptr<SidebandSession> session = std::move(*started);
  const int pid = session->target().pid();

  PtStreamSetOptions stream_options = EmulatedStreamOptions(options);
  stream_options.trim_marks = trigger_spec->trim;
  PtStreamSet streams(stream_options, &*dir);

  PtraceStepperOptions stepper_options;
  stepper_options.duration_s = options.duration_s;
  stepper_options.progress = !options.quiet && isatty(STDERR_FILENO);
  stepper_options.kill_on_exit = !options.command.empty();
  stepper_options.follow_forks = options.follow_children;
  stepper_options.clock.wall = options.wall_clock;
  stepper_options.clock.one_clock = options.virtual_cpus > 0;
  SetSymbolResolvers(options, pid, &stepper_options);
  // Requests are served between two steps; a stop asked for on the FIFO is answered
  // once the trace directory is committed.
  absl::StatusOr<std::unique_ptr<EmulationControl>> control =
      EmulationControl::Start(options.control_fifo, options.duration_s);
  if (!control.ok()) return control.status();
  std::vector<EmulationRequest> stop_requests;
  std::vector<std::string> request_notes;
  PtraceStepper* stepper_ptr = nullptr;
  stepper_options.requests_pending = (*control)->pending();
  stepper_options.serve_requests = [&]() {
    for (const EmulationRequest& request : (*control)->Take()) {
      switch (request.kind) {
        case EmulationRequest::Kind::kSnapshot:
          (*control)->Answer(request, streams.Snapshot(request.reason, stepper_ptr->clock().AlignAll()));
          break;
        case EmulationRequest::Kind::kStop:
          if (request.from_fifo) stop_requests.push_back(request);
          // String literals: RequestStop keeps the pointer.
          stepper_ptr->RequestStop(request.reason == "control"    ? "control"
                                   : request.reason == "duration" ? "duration"
                                   : request.reason == "sigterm"  ? "sigterm"
                                                                  : "sigint");
          break;
        case EmulationRequest::Kind::kUnknownCommand:
          request_notes.push_back(absl::StrCat("control: unknown command \"", request.text, "\""));
          (*control)->Answer(request, absl::InvalidArgumentError(absl::StrCat(
                                          "unknown command \"", request.text, "\" (want snapshot or stop)")));
          break;
      }
    }
  };
  TriggerPolicy trigger(*trigger_spec);
  auto fire = [&](const TriggerFiring&) {
    if (options.multi_snapshot) {
      absl::Status s = streams.Snapshot("trigger", stepper_ptr->clock().AlignAll());
      if (!s.ok()) request_notes.push_back(absl::StrCat("trigger snapshot: ", s.message()));
    } else {
      stepper_ptr->RequestStop("trigger");
    }
  };
  stepper_options.on_trigger = [&](int pid, int tid, uint64_t sp, uint64_t time) {
    if (std::optional<TriggerFiring> fired = trigger.OnEntry(pid, tid, sp, time)) fire(*fired);
  };
  if (trigger.watches_returns()) {
    stepper_options.on_step = [&](int, int tid, uint64_t sp, uint64_t time) {
      if (std::optional<TriggerFiring> fired = trigger.OnStack(tid, sp, time)) fire(*fired);
    };
  }
  JitCodeCapture jit_capture;
  stepper_options.jit_capture = &jit_capture;
  if (!options.cgroup.empty()) {
    stepper_options.periodic = [&]() { AttachCgroupNewcomers(options.cgroup, *session, *stepper_ptr, &request_notes); };
  }
  PtraceStepper stepper(stepper_options, &streams, truth ? &*truth : nullptr);
  stepper_ptr = &stepper;

  if (absl::Status s = AddTargetThreads(options, *session, pid, stepper); !s.ok()) return s;

  absl::Status run_status = stepper.Run();
  // On the trace's axis: after every thread's end.
  const uint64_t end_ns = stepper.clock().Newest() + 1;

  TraceMeta meta;
  absl::Status session_status = session->Finish(&meta);
  RewriteKernelSideband(*dir, stepper.clock(), options.virtual_cpus > 0, &meta);
  streams.set_end_reason(stepper.end_reason());
  meta.trigger = TriggerPointOf(trigger);
  if (meta.trigger && trigger_spec->trim) {
    streams.TrimFrom(meta.trigger->entry_ns);
    meta.trigger->trimmed_from_ns = meta.trigger->entry_ns;
  }
  absl::Status streams_status = streams.Finish(end_ns, &meta);
  DescribeEmulatedPt(options, stream_options, &meta);
  meta.emulator = "ptrace";
  meta.time_axis = options.wall_clock ? "wall" : "virtual";
  meta.end_reason = stepper.end_reason();
  if (meta.end_ns < end_ns) meta.end_ns = end_ns;
  AddRunNotes(options, pid, stepper, streams, trigger, request_notes, &meta);
  if (!session_status.ok()) meta.notes.push_back(std::string(session_status.message()));
  if (absl::Status s = jit_capture.Write(*dir, &meta.notes); !s.ok()) session_status.Update(s);

  if (truth) {
    if (absl::Status s = truth->Close(); !s.ok()) return s;
  }
  ArchiveMappedFiles(*dir, {options.archive, options.archive_cache_dir, nullptr, options.debuginfod}, &meta);
  // A failed write (disk full, file size limit): commit what reached the disk, marked
  // partial, and still fail (docs/robustness.md).
  const absl::Status write_error = !streams_status.ok() ? streams_status
                                   : absl::IsResourceExhausted(session_status) ? session_status
                                                                               : absl::OkStatus();
  if (!write_error.ok()) {
    if (absl::Status kept = dir->CommitPartial(meta, write_error); !kept.ok()) {
      return absl::Status(write_error.code(), absl::StrCat(write_error.message(), "; ", kept.message()));
    }
    return absl::Status(write_error.code(),
                        absl::StrCat(write_error.message(), "; what was written is kept in ",
                                     options.output_dir, " (marked partial)"));
  }
  if (!run_status.ok()) meta.notes.push_back(absl::StrCat("tracer error: ", run_status.message()));
  absl::Status committed = dir->Commit(meta);
  for (const EmulationRequest& request : stop_requests) (*control)->Answer(request, committed);
  if (!committed.ok()) return committed;

  EmulatedRecordSummary summary = SummaryOf(options, pid, stepper, streams, trigger.entries(), meta.end_reason);
  if (!run_status.ok()) return run_status;
  return summary;
}

}  // namespace ptd
