// ptd::Recorder and ptd::TraceScope (recorder/include/ptd/): the public API over the
// backends. Hardware: PtRecording in this thread (plus a drain thread in full-trace mode),
// files in a private staging directory until WriteTo() copies them. Emulation (ptrace,
// Valgrind): the backend's Record function runs on a thread of the library, writing a
// private trace directory; snapshot and stop requests go to it through its control FIFO
// (the same channel as `record --control`), answered once done.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "ptd/recorder.h"
#include "ptd/trace_scope.h"
#include "ptd/version.h"
#include "recorder/emulate/emulated_recorder.h"
#include "recorder/session/emulated_run.h"
#include "recorder/pt/pt_recording.h"
#include "recorder/session/record_backend.h"
#include "recorder/target/target_process.h"
#include "recorder/valgrind/valgrind_recorder.h"

namespace ptd {
namespace {

bool PtraceAvailable(std::string* why) {
  absl::StatusOr<std::string> scope = ReadFileToString("/proc/sys/kernel/yama/ptrace_scope");
  if (scope.ok() && !scope->empty() && (*scope)[0] == '3') {
    *why = "ptrace is disabled on this machine (kernel.yama.ptrace_scope = 3)";
    return false;
  }
  return true;
}

std::string StagingPath() {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TMPDIR");
  return absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/ptd-recorder-", getpid(), "-",
                      counter++);
}

// Copies a trace directory's files (all but meta.json) into `out`'s staging directory and
// commits it with `meta`.
absl::Status CopyTraceDir(const std::string& from, TraceDirWriter& out, const TraceMeta& meta) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(from, ec)) {
    if (entry.path().filename() == "meta.json") continue;
    std::filesystem::copy(entry.path(), std::filesystem::path(out.staging_dir()) / entry.path().filename(),
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::overwrite_existing,
                          ec);
    if (ec) break;
  }
  if (ec) {
    return absl::InternalError(absl::StrCat("copy ", from, " to ", out.staging_dir(), ": ", ec.message()));
  }
  return out.Commit(meta);
}

bool PowerOfTwoPages(uint64_t bytes) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return bytes >= page && (bytes & (bytes - 1)) == 0;
}

// The config's own consistency, before any backend is looked at.
absl::Status ValidateConfig(const RecorderConfig& c) {
  for (size_t i = 0; i < c.pids.size(); ++i) {
    if (c.pids[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("RecorderConfig.pids[", i, "] = ", c.pids[i], ": not a process id"));
    }
    if (std::find(c.pids.begin(), c.pids.begin() + static_cast<long>(i), c.pids[i]) !=
        c.pids.begin() + static_cast<long>(i)) {
      return absl::InvalidArgumentError(absl::StrCat("RecorderConfig.pids[", i, "] = ", c.pids[i], ": given twice"));
    }
  }
  if (!c.pids.empty() && !c.command.empty()) {
    return absl::InvalidArgumentError(
        "RecorderConfig.pids and RecorderConfig.command are both set: give one (attach or launch)");
  }
  for (const auto& [name, bytes] : {std::pair<const char*, uint64_t>{"snapshot_size", c.snapshot_size},
                                    {"buffer_size", c.buffer_size}}) {
    if (!PowerOfTwoPages(bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("RecorderConfig.", name, " = ", bytes,
                                                     ": not a power-of-two number of ",
                                                     sysconf(_SC_PAGESIZE), "-byte pages"));
    }
  }
  if (c.timing != "low" && c.timing != "normal" && c.timing != "high") {
    return absl::InvalidArgumentError(
        absl::StrCat("RecorderConfig.timing \"", c.timing, "\": want low, normal or high"));
  }
  if (!c.command.empty()) {
    if (absl::StatusOr<std::string> exe = ResolveExecutable(c.command[0]); !exe.ok()) {
      return absl::Status(exe.status().code(),
                          absl::StrCat("RecorderConfig.command[0]: ", exe.status().message()));
    }
  }
  for (size_t i = 0; i < c.pids.size(); ++i) {
    if (kill(c.pids[i], 0) != 0 && errno == ESRCH) {
      return absl::NotFoundError(absl::StrCat("RecorderConfig.pids[", i, "] = ", c.pids[i], ": no such process"));
    }
  }
  return absl::OkStatus();
}

// Options only Intel PT has, refused by the emulation backends.
absl::Status CheckEmulationConfig(const RecorderConfig& c, Backend backend) {
  const std::string prefix = absl::StrCat("the ", BackendName(backend), " backend ");
  if (!c.pt_config.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("RecorderConfig.pt_config: ", prefix, "has no intel_pt fields"));
  }
  if (c.kernel) {
    return absl::InvalidArgumentError(absl::StrCat("RecorderConfig.kernel: ", prefix, "traces user space only"));
  }
  if (!c.filter.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("RecorderConfig.filter: ", prefix, "has no address filters"));
  }
  if (!c.per_thread) {
    return absl::InvalidArgumentError(absl::StrCat("RecorderConfig.per_thread = false: ", prefix,
                                                   "records one stream per thread"));
  }
  return absl::OkStatus();
}

TimingPreset ParseTiming(const std::string& timing) {
  return timing == "low" ? TimingPreset::kLow : timing == "high" ? TimingPreset::kHigh : TimingPreset::kNormal;
}

}  // namespace

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kAuto: return "auto";
    case Backend::kHardware: return "hardware";
    case Backend::kValgrind: return "valgrind";
    case Backend::kPtrace: return "ptrace";
  }
  return "?";
}

struct Recorder::Impl {
  RecorderConfig config;
  Backend backend = Backend::kAuto;
  std::string backend_choice;
  bool started = false;
  bool stopped = false;
  absl::Status stop_status;
  std::optional<int> exit_code;  // Wait()'s answer, once known

  // Hardware.
  std::unique_ptr<pt::PtRingFactory> kernel_factory;
  std::optional<TraceDirWriter> staging;
  std::unique_ptr<pt::PtRecording> recording;
  std::mutex mu;  // recording calls from the caller and the drain thread
  std::thread drainer;
  std::condition_variable drain_cv;
  bool stop_draining = false;
  TraceMeta meta;

  // Emulation (ptrace, Valgrind).
  std::unique_ptr<EmulatedRun> emulated;

  pt::PtRecordingOptions HardwareOptions() const {
    pt::PtRecordingOptions options;
    RecordOptions& record = options.record;
    record.command = config.command;
    record.pids = config.pids;
    record.snapshot = config.snapshot;
    record.snapshot_size = config.snapshot_size;
    record.buffer_size = config.buffer_size;
    // Sizes left at their defaults may be lowered to perf's, as for the CLI.
    record.default_ring_sizes = config.snapshot_size == RecorderConfig{}.snapshot_size &&
                                config.buffer_size == RecorderConfig{}.buffer_size;
    record.per_thread = config.per_thread;
    record.timing = ParseTiming(config.timing);
    record.pt_config = config.pt_config;
    record.kernel = config.kernel;
    record.filter = config.filter;
    record.archive = config.archive;
    record.quiet = true;
    options.sysfs_root = config.sysfs_root;
    if (record.command.empty() && record.pids.empty()) {
      options.self_tids = {static_cast<int>(syscall(SYS_gettid))};
      record.per_thread = true;  // one thread: one ring
    }
    return options;
  }

  absl::Status StartHardware(const pt::PtRecordingOptions& options) {
    pt::PtRingFactory* factory = config.ring_factory.get();
    if (factory == nullptr) {
      kernel_factory = pt::MakeKernelPtRingFactory();
      factory = kernel_factory.get();
    }
    absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(StagingPath(), true);
    if (!dir.ok()) return dir.status();
    staging.emplace(*std::move(dir));
    absl::StatusOr<std::unique_ptr<pt::PtRecording>> started_recording =
        pt::PtRecording::Start(options, factory, *staging);
    if (!started_recording.ok()) return started_recording.status();
    recording = *std::move(started_recording);
    if (!options.record.snapshot) {
      // Full-trace mode must be drained while the target runs, whatever the caller does.
      drainer = std::thread([this] {
        std::unique_lock<std::mutex> lock(mu);
        while (!stop_draining) {
          (void)recording->Drain();
          drain_cv.wait_for(lock, std::chrono::milliseconds(20));
        }
      });
    }
    return absl::OkStatus();
  }

  absl::Status StartEmulated() {
    if (absl::Status st = CheckEmulationConfig(config, backend); !st.ok()) return st;
    RecordOptions record;
    record.command = config.command;
    record.pids = config.pids;
    record.output_dir = StagingPath();
    record.force = true;
    record.emulate = true;
    record.per_thread = true;
    record.snapshot = config.snapshot;
    record.snapshot_size = config.snapshot_size;
    record.buffer_size = config.buffer_size;
    record.timing = ParseTiming(config.timing);
    record.archive = config.archive;
    record.control_fifo = record.output_dir + ".control";
    record.quiet = true;
    absl::StatusOr<std::unique_ptr<EmulatedRun>> run =
        EmulatedRun::Start(backend == Backend::kPtrace ? &RecordEmulated : &RecordValgrind, std::move(record));
    if (!run.ok()) return run.status();
    emulated = *std::move(run);
    return absl::OkStatus();
  }

  void StopDrainer() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop_draining = true;
    }
    drain_cv.notify_all();
    if (drainer.joinable()) drainer.join();
  }
};

Recorder::Recorder(RecorderConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
}

Recorder::~Recorder() {
  if (impl_->started) (void)Stop();
  impl_->emulated.reset();
  impl_->recording.reset();
  if (impl_->staging) impl_->staging->Abort();
}

int Recorder::target_pid() const {
  if (impl_->emulated != nullptr) return impl_->config.pids.empty() ? -1 : impl_->config.pids.front();
  if (impl_->recording == nullptr || impl_->recording->target() == nullptr) return -1;
  return impl_->recording->target()->pid();
}

Backend Recorder::backend() const { return impl_->backend; }
const std::string& Recorder::backend_choice() const { return impl_->backend_choice; }

absl::Status Recorder::Start() {
  Impl& m = *impl_;
  if (m.started) return absl::FailedPreconditionError("Recorder::Start called twice");
  if (absl::Status st = ValidateConfig(m.config); !st.ok()) return st;
  const bool self = m.config.command.empty() && m.config.pids.empty();
  const pt::PtRecordingOptions hardware = m.HardwareOptions();
  Backend chosen = m.config.backend;
  if (self && chosen != Backend::kAuto && chosen != Backend::kHardware) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RecorderConfig.backend = ", BackendName(chosen),
        " cannot trace the calling thread (RecorderConfig.command and RecorderConfig.pids empty): "
        "only Intel PT hardware can; give a command or a pid"));
  }
  // Fail before creating anything when the backend cannot work here. Hardware is checked
  // here (sysfs_root, permissions); which emulator is the CLI's choice (ChooseBackend).
  std::string why;
  if (chosen == Backend::kAuto) {
    absl::StatusOr<pt::PtPmuInfo> pmu = pt::CheckPtRecordable(hardware, nullptr);
    if (pmu.ok()) {
      chosen = Backend::kHardware;
    } else if (self) {
      return absl::Status(pmu.status().code(),
                          absl::StrCat("tracing the calling thread needs Intel PT: ", pmu.status().message()));
    } else {
      RecordOptions emulate;
      emulate.emulate = true;
      emulate.pids = m.config.pids;
      absl::StatusOr<BackendChoice> choice = ChooseBackend(emulate);
      if (!choice.ok()) return choice.status();
      chosen = choice->backend == RecordBackend::kValgrind ? Backend::kValgrind : Backend::kPtrace;
      m.backend_choice = absl::StrCat("hardware: ", pmu.status().message(), "; ", choice->why);
      if (chosen == Backend::kPtrace && !PtraceAvailable(&why)) {
        return absl::FailedPreconditionError(
            absl::StrCat("RecorderConfig.backend = auto: no backend can record here (", m.backend_choice, "; ", why, ")"));
      }
    }
  } else if (chosen == Backend::kHardware) {
    if (absl::StatusOr<pt::PtPmuInfo> pmu = pt::CheckPtRecordable(hardware, nullptr); !pmu.ok()) {
      return absl::Status(pmu.status().code(),
                          absl::StrCat("RecorderConfig.backend = hardware: ", pmu.status().message()));
    }
  } else if (chosen == Backend::kValgrind) {
    RecordOptions emulate;
    emulate.emulate = true;
    emulate.emulator = "valgrind";
    emulate.pids = m.config.pids;
    if (absl::StatusOr<BackendChoice> choice = ChooseBackend(emulate); !choice.ok()) {
      return absl::Status(choice.status().code(),
                          absl::StrCat("RecorderConfig.backend = valgrind: ", choice.status().message()));
    }
  } else if (!PtraceAvailable(&why)) {
    return absl::FailedPreconditionError(absl::StrCat("RecorderConfig.backend = ptrace: ", why));
  }
  m.backend = chosen;
  absl::Status started = chosen == Backend::kHardware ? m.StartHardware(hardware) : m.StartEmulated();
  if (started.ok()) m.started = true;
  return started;
}

absl::StatusOr<int> Recorder::Wait() {
  Impl& m = *impl_;
  if (!m.started) return absl::FailedPreconditionError("Recorder was not started");
  if (m.config.command.empty()) {
    return absl::FailedPreconditionError("Recorder::Wait: no launched command (RecorderConfig.command is empty)");
  }
  if (m.exit_code) return *m.exit_code;
  if (m.emulated != nullptr) {
    const absl::StatusOr<EmulatedRecordSummary>& result = m.emulated->Join();
    if (!result.ok()) return result.status();
    if (result->exit_status < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Recorder::Wait: the recording ended (", result->end_reason, ") before the command exited"));
    }
    m.exit_code = result->exit_status;
    return *m.exit_code;
  }
  absl::StatusOr<int> status = m.recording->target()->Wait();
  if (!status.ok()) return status.status();
  m.exit_code = ShellExitCode(*status);
  return *m.exit_code;
}

absl::Status Recorder::Snapshot() {
  Impl& m = *impl_;
  if (!m.started || m.stopped) return absl::FailedPreconditionError("Recorder is not recording");
  if (m.emulated != nullptr) return m.emulated->Request("snapshot");
  std::lock_guard<std::mutex> lock(m.mu);
  return m.recording->Snapshot("api");
}

absl::Status Recorder::Stop() {
  Impl& m = *impl_;
  if (!m.started) return absl::FailedPreconditionError("Recorder was not started");
  if (m.stopped) return m.stop_status;
  m.stopped = true;
  if (m.emulated != nullptr) {
    absl::Status requested = m.emulated->Request("stop");
    const absl::StatusOr<EmulatedRecordSummary>& result = m.emulated->Join();
    m.stop_status = !result.ok() ? result.status() : requested;
    if (result.ok() && result->exit_status >= 0) m.exit_code = result->exit_status;
    return m.stop_status;
  }
  m.StopDrainer();
  std::lock_guard<std::mutex> lock(m.mu);
  absl::Status last = m.recording->Snapshot("stop");
  m.meta.tool_version = kToolVersion;
  absl::Status finished = m.recording->Finish("api", {}, &m.meta);
  m.stop_status = last.ok() ? finished : last;
  return m.stop_status;
}

absl::Status Recorder::WriteTo(const std::string& dir, bool force) {
  Impl& m = *impl_;
  if (!m.started) return absl::FailedPreconditionError("Recorder was not started");
  if (!m.stopped) {
    if (absl::Status st = Stop(); !st.ok()) return st;
  }
  if (!m.stop_status.ok()) return m.stop_status;
  std::string from = m.emulated != nullptr ? m.emulated->Join()->trace_dir : m.staging->staging_dir();
  TraceMeta meta = m.meta;
  if (m.emulated != nullptr) {
    absl::StatusOr<TraceMeta> written = ReadTraceMeta(from);
    if (!written.ok()) return written.status();
    meta = *std::move(written);
  }
  absl::StatusOr<TraceDirWriter> out = TraceDirWriter::Create(dir, force);
  if (!out.ok()) return out.status();
  return CopyTraceDir(from, *out, meta);
}

TraceScope::TraceScope(std::string output_dir, RecorderConfig config)
    : output_dir_(std::move(output_dir)) {
  config.command.clear();
  config.pids.clear();
  recorder_ = std::make_unique<Recorder>(std::move(config));
  status_ = recorder_->Start();
}

TraceScope::~TraceScope() { (void)Close(); }

absl::Status TraceScope::Close() {
  if (closed_ || !status_.ok()) return status_;
  closed_ = true;
  status_ = recorder_->WriteTo(output_dir_, /*force=*/true);
  return status_;
}

}  // namespace ptd
