// ptd::Recorder and ptd::TraceScope (recorder/include/ptd/): the public API over
// PtRecording. Files go to a private staging directory until WriteTo() copies them.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "ptd/recorder.h"
#include "ptd/trace_scope.h"
#include "ptd/version.h"
#include "recorder/pt/pt_recording.h"

namespace ptd {

struct Recorder::Impl {
  RecorderConfig config;
  std::unique_ptr<pt::PtRingFactory> kernel_factory;
  std::optional<TraceDirWriter> staging;
  std::unique_ptr<pt::PtRecording> recording;
  std::mutex mu;  // recording calls from the caller and the drain thread
  std::thread drainer;
  std::condition_variable drain_cv;
  bool stop_draining = false;
  bool started = false;
  bool stopped = false;
  TraceMeta meta;
  absl::Status stop_status;

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
  (void)Stop();
  impl_->recording.reset();
  if (impl_->staging) impl_->staging->Abort();
}

int Recorder::target_pid() const {
  if (impl_->recording == nullptr || impl_->recording->target() == nullptr) return -1;
  return impl_->recording->target()->pid();
}

absl::Status Recorder::Start() {
  Impl& m = *impl_;
  if (m.started) return absl::FailedPreconditionError("Recorder::Start called twice");
  static const std::map<std::string, TimingPreset> kPresets = {
      {"low", TimingPreset::kLow}, {"normal", TimingPreset::kNormal}, {"high", TimingPreset::kHigh}};
  auto timing = kPresets.find(m.config.timing);
  if (timing == kPresets.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RecorderConfig.timing \"", m.config.timing, "\": want low, normal or high"));
  }
  pt::PtRecordingOptions options;
  RecordOptions& record = options.record;
  record.command = m.config.command;
  record.pid = m.config.pid;
  record.snapshot = m.config.snapshot;
  record.snapshot_size = m.config.snapshot_size;
  record.buffer_size = m.config.buffer_size;
  // Sizes left at their defaults may be lowered to perf's, as for the CLI.
  record.default_ring_sizes = m.config.snapshot_size == RecorderConfig{}.snapshot_size &&
                              m.config.buffer_size == RecorderConfig{}.buffer_size;
  record.per_thread = m.config.per_thread;
  record.timing = timing->second;
  record.pt_config = m.config.pt_config;
  record.kernel = m.config.kernel;
  record.filter = m.config.filter;
  record.quiet = true;
  options.sysfs_root = m.config.sysfs_root;
  if (record.command.empty() && record.pid <= 0) {
    options.self_tids = {static_cast<int>(syscall(SYS_gettid))};
    record.per_thread = true;  // one thread: one ring
  }
  // Fail before creating anything when PT cannot work here.
  if (absl::StatusOr<pt::PtPmuInfo> pmu = pt::CheckPtRecordable(options, nullptr); !pmu.ok()) {
    return pmu.status();
  }
  pt::PtRingFactory* factory = m.config.ring_factory.get();
  if (factory == nullptr) {
    m.kernel_factory = pt::MakeKernelPtRingFactory();
    factory = m.kernel_factory.get();
  }
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TMPDIR");
  const std::string staging_name = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp",
                                                "/ptd-recorder-", getpid(), "-", counter++);
  absl::StatusOr<TraceDirWriter> staging = TraceDirWriter::Create(staging_name, true);
  if (!staging.ok()) return staging.status();
  m.staging.emplace(*std::move(staging));
  absl::StatusOr<std::unique_ptr<pt::PtRecording>> recording =
      pt::PtRecording::Start(options, factory, *m.staging);
  if (!recording.ok()) return recording.status();
  m.recording = *std::move(recording);
  m.started = true;
  if (!record.snapshot) {
    // Full-trace mode must be drained while the target runs, whatever the caller does.
    m.drainer = std::thread([&m] {
      std::unique_lock<std::mutex> lock(m.mu);
      while (!m.stop_draining) {
        (void)m.recording->Drain();
        m.drain_cv.wait_for(lock, std::chrono::milliseconds(20));
      }
    });
  }
  return absl::OkStatus();
}

absl::Status Recorder::Snapshot() {
  Impl& m = *impl_;
  if (!m.started || m.stopped) return absl::FailedPreconditionError("Recorder is not recording");
  std::lock_guard<std::mutex> lock(m.mu);
  return m.recording->Snapshot("api");
}

absl::Status Recorder::Stop() {
  Impl& m = *impl_;
  if (!m.started) return absl::FailedPreconditionError("Recorder was not started");
  if (m.stopped) return m.stop_status;
  m.StopDrainer();
  std::lock_guard<std::mutex> lock(m.mu);
  m.stopped = true;
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
  absl::StatusOr<TraceDirWriter> out = TraceDirWriter::Create(dir, force);
  if (!out.ok()) return out.status();
  std::error_code ec;
  std::filesystem::copy(m.staging->staging_dir(), out->staging_dir(),
                        std::filesystem::copy_options::recursive |
                            std::filesystem::copy_options::overwrite_existing,
                        ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("copy ", m.staging->staging_dir(), " to ",
                                            out->staging_dir(), ": ", ec.message()));
  }
  return out->Commit(m.meta);
}

TraceScope::TraceScope(std::string output_dir, RecorderConfig config)
    : output_dir_(std::move(output_dir)) {
  config.command.clear();
  config.pid = -1;
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
