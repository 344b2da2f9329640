#include "recorder/emulate/emulated_recorder.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "recorder/emulate/elf_symbol.h"
#include "recorder/emulate/ground_truth_writer.h"
#include "recorder/emulate/ptrace_stepper.h"
#include "recorder/emulate/pt_stream_set.h"
#include "recorder/sideband_session.h"

namespace ptd {
namespace {

PtraceStepper* g_active_stepper = nullptr;

void OnStopSignal(int) {
  if (g_active_stepper != nullptr) g_active_stepper->RequestStop();
}

// Restores the previous SIGINT/SIGTERM handlers when recording ends.
class StopSignalScope {
 public:
  explicit StopSignalScope(PtraceStepper* stepper) {
    g_active_stepper = stepper;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = OnStopSignal;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    g_active_stepper = nullptr;
  }

 private:
  struct sigaction old_int_;
  struct sigaction old_term_;
};

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// In per-CPU emulation the kernel's real context switches describe the real CPUs, not
// the virtual ones the PT streams were generated for: drop them so the decoder's CPU
// schedule comes only from the synthesized records.
absl::Status DropKernelSwitchRecords(const std::string& path) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  std::vector<uint8_t> kept;
  kept.reserve(bytes->size());
  size_t pos = 0;
  while (pos + 8 <= bytes->size()) {
    uint32_t type = 0;
    uint16_t size = 0;
    std::memcpy(&type, bytes->data() + pos, 4);
    std::memcpy(&size, bytes->data() + pos + 6, 2);
    if (size < 8 || pos + size > bytes->size()) break;
    if (type != PERF_RECORD_SWITCH && type != PERF_RECORD_SWITCH_CPU_WIDE) {
      kept.insert(kept.end(), bytes->begin() + static_cast<long>(pos),
                  bytes->begin() + static_cast<long>(pos + size));
    }
    pos += size;
  }
  return WriteFileAtomic(path, absl::Span<const uint8_t>(kept));
}

}  // namespace

absl::StatusOr<EmulatedRecordSummary> RecordEmulated(const RecordOptions& options) {
  if (options.command.empty() == (options.pid <= 0)) {
    return absl::InvalidArgumentError("record --emulate: give either a command (after --) or --pid");
  }
  if (options.virtual_cpus < 0 || options.virtual_cpus > 256) {
    return absl::InvalidArgumentError("record --emulate: --virtual-cpus must be 0..256");
  }
  // Snapshot triggers are implemented by the hardware path's session loop only; refusing
  // them is better than a recording that silently ignores what the user asked for.
  if (!options.trigger_symbol.empty() || !options.control_fifo.empty() || options.multi_snapshot) {
    return absl::UnimplementedError(
        "record --emulate: --trigger, --control and --multi-snapshot are not supported by the "
        "emulation backend yet (snapshots are taken at exit, SIGINT or --duration)");
  }
  if (options.snapshot && options.snapshot_size < 4096) {
    return absl::InvalidArgumentError("record --emulate: --snapshot-size must be at least 4096 bytes");
  }
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(options.output_dir, options.force);
  if (!dir.ok()) return dir.status();

  std::optional<GroundTruthWriter> truth;
  if (!options.ground_truth_path.empty()) {
    absl::StatusOr<GroundTruthWriter> writer = GroundTruthWriter::Create(options.ground_truth_path);
    if (!writer.ok()) return writer.status();
    truth.emplace(std::move(*writer));
  }

  SidebandSessionOptions session_options;
  session_options.sideband.per_cpu = true;  // inherit: new threads and children followed
  session_options.sideband.clockid = CLOCK_MONOTONIC;
  session_options.sideband.data_size = options.data_size;
  session_options.keep_traced = true;
  std::unique_ptr<SidebandSession> session;
  if (!options.command.empty()) {
    session_options.sideband.enable_on_exec = true;
    absl::StatusOr<std::unique_ptr<SidebandSession>> launched =
        SidebandSession::Launch(options.command, session_options, *dir);
    if (!launched.ok()) return launched.status();
    session = std::move(*launched);
  } else {
    absl::StatusOr<std::unique_ptr<SidebandSession>> attached =
        SidebandSession::Attach(options.pid, session_options, *dir);
    if (!attached.ok()) return attached.status();
    session = std::move(*attached);
  }
  const int pid = session->target().pid();

  PtStreamSetOptions stream_options;
  stream_options.generator.psb_period = options.psb_period;
  stream_options.generator.noretcomp =
      options.noretcomp || options.timing == TimingPreset::kHigh;
  // The emulated clock is coarse (one step is tens of microseconds): "normal" and
  // "high" put a TSC before packets whenever a microsecond has passed, "low" only
  // in PSB+ and at enables, as the hardware's tsc-only setting does.
  stream_options.generator.tsc_interval = options.timing == TimingPreset::kLow ? 0 : 1000;
  stream_options.virtual_cpus = options.virtual_cpus;
  stream_options.snapshot = options.snapshot;
  stream_options.snapshot_size = options.snapshot_size;
  PtStreamSet streams(stream_options, &*dir);

  PtraceStepperOptions stepper_options;
  stepper_options.duration_s = options.duration_s;
  stepper_options.progress = !options.quiet && isatty(STDERR_FILENO);
  stepper_options.kill_on_exit = !options.command.empty();
  if (!options.start_at_symbol.empty()) {
    absl::StatusOr<uint64_t> address = ResolveStartSymbol(pid, options.start_at_symbol);
    if (!address.ok()) return address.status();
    stepper_options.start_address = *address;
  }
  PtraceStepper stepper(stepper_options, &streams, truth ? &*truth : nullptr);

  if (!options.command.empty()) {
    if (absl::Status s = stepper.AddStoppedThread(pid, pid); !s.ok()) return s;
  } else {
    absl::StatusOr<std::vector<int>> tids = session->target().Threads();
    if (!tids.ok()) return tids.status();
    for (int tid : *tids) {
      if (ptrace(PTRACE_ATTACH, tid, nullptr, nullptr) != 0) {
        return ErrnoError("ptrace(PTRACE_ATTACH)", absl::StrFormat("thread %d of process %d", tid, pid),
                          errno);
      }
      int status = 0;
      if (waitpid(tid, &status, __WALL) != tid || !WIFSTOPPED(status)) {
        return absl::InternalError(absl::StrFormat("thread %d of process %d did not stop after attach", tid, pid));
      }
      if (absl::Status s = stepper.AddStoppedThread(pid, tid); !s.ok()) return s;
    }
  }

  absl::Status run_status;
  {
    StopSignalScope stop_scope(&stepper);
    run_status = stepper.Run();
  }
  const uint64_t end_ns = MonotonicNs();

  EmulatedRecordSummary summary;
  TraceMeta meta;
  absl::Status session_status = session->Finish(&meta);
  streams.set_end_reason(stepper.end_reason());
  absl::Status streams_status = streams.Finish(end_ns, &meta);
  meta.mode = TraceMode::kEmulated;
  meta.per = options.virtual_cpus > 0 ? "cpu" : "thread";
  meta.pt.pmu_type = -1;
  meta.pt.timing = options.timing == TimingPreset::kLow ? "low"
                   : options.timing == TimingPreset::kHigh ? "high" : "normal";
  meta.pt.user_only = true;
  meta.pt.fields["tsc"] = 1;
  meta.pt.fields["noretcomp"] = stream_options.generator.noretcomp ? 1 : 0;
  meta.pt.psb_period_bytes = options.psb_period;
  meta.time = TimeConversion{};  // identity: TSC packets carry CLOCK_MONOTONIC ns
  meta.time.cap_user_time_zero = true;
  meta.end_reason = stepper.end_reason();
  if (meta.end_ns < end_ns) meta.end_ns = end_ns;
  const PtraceStepperStats& stats = stepper.stats();
  meta.notes.push_back(absl::StrFormat(
      "emulated with ptrace single-stepping: %u steps, %u instructions, %u threads, %.1f s "
      "(%.0f steps/s)",
      stats.steps, stats.instructions, stats.threads, stats.seconds,
      stats.seconds > 0 ? static_cast<double>(stats.steps) / stats.seconds : 0.0));
  if (stats.undecodable > 0) {
    meta.notes.push_back(absl::StrFormat(
        "%u executed instructions could not be decoded by capstone; they were traced as "
        "non-branches", stats.undecodable));
  }
  if (!options.start_at_symbol.empty() && !stats.start_reached) {
    meta.notes.push_back(absl::StrCat("--start-at ", options.start_at_symbol,
                                      ": never reached; nothing was traced"));
  }
  if (options.virtual_cpus > 0) {
    for (const SidebandFile& file : meta.sideband) {
      if (file.origin != "kernel") continue;
      if (absl::Status s = DropKernelSwitchRecords(dir->FilePath(file.file)); !s.ok()) {
        meta.notes.push_back(absl::StrCat("could not filter ", file.file, ": ", s.message()));
      }
    }
    meta.notes.push_back(
        "virtual CPUs: the kernel's context-switch records were dropped; sideband/vcpu*.data "
        "hold the synthesized schedule of the virtual CPUs");
  }
  if (!session_status.ok()) meta.notes.push_back(std::string(session_status.message()));

  if (truth) {
    if (absl::Status s = truth->Close(); !s.ok()) return s;
  }
  if (!streams_status.ok()) return streams_status;
  if (!run_status.ok()) meta.notes.push_back(absl::StrCat("tracer error: ", run_status.message()));
  if (absl::Status s = dir->Commit(meta); !s.ok()) return s;

  summary.trace_dir = options.output_dir;
  summary.steps = stats.steps;
  summary.instructions = stats.instructions;
  summary.pt_bytes = streams.stats().bytes;
  summary.threads = stats.threads;
  summary.undecodable = stats.undecodable;
  summary.signals_delivered = stats.signals_delivered;
  summary.seconds = stats.seconds;
  summary.end_reason = stepper.end_reason();
  const int status = stepper.exit_status(pid);
  if (status >= 0) {
    summary.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  if (!run_status.ok()) return run_status;
  return summary;
}

}  // namespace ptd
