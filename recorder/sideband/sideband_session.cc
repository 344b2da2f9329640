#include "recorder/sideband/sideband_session.h"

#include <time.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "ptd/version.h"
#include "recorder/images/jit_files.h"
#include "recorder/images/vdso_dump.h"
#include "sideband/record_reader.h"

namespace ptd {
namespace {

uint64_t ClockNs(int clockid) {
  timespec ts{};
  clock_gettime(clockid >= 0 ? clockid : CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct TimeRange {
  uint64_t first = std::numeric_limits<uint64_t>::max();
  uint64_t last = 0;
  bool empty() const { return first > last; }
};

// The span of sample_id times in the recorded files. Parse problems are left to the
// readers of the trace (info, decode), which report them with offsets.
TimeRange RecordedTimeRange(const TraceDirWriter& dir, const std::vector<SidebandFile>& files) {
  TimeRange range;
  for (const SidebandFile& f : files) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(dir.FilePath(f.file));
    if (!bytes.ok()) continue;
    RecordList list = ReadRecordsUpToError(*bytes, f.file, RecordFormat{f.sample_type, f.sample_id_all});
    for (const PerfRecord& r : list.records) {
      if (!r.sample_id.has_time) continue;
      range.first = std::min(range.first, r.sample_id.time);
      range.last = std::max(range.last, r.sample_id.time);
    }
  }
  return range;
}

}  // namespace

SidebandSession::SidebandSession(const SidebandSessionOptions& options, const TraceDirWriter& dir)
    : options_(options), dir_(dir) {}

SidebandSession::~SidebandSession() {
  if (recorder_ != nullptr) (void)recorder_->Stop();
}

std::vector<TargetProcess*> SidebandSession::targets() {
  std::vector<TargetProcess*> out;
  for (Process& p : targets_) out.push_back(p.target.get());
  return out;
}

absl::Status SidebandSession::DumpMemory(Process& process) {
  absl::StatusOr<std::vector<ProcMapping>> maps =
      DumpSpecialMemoryOf(process.target->pid(), dir_, &images_, &notes_);
  if (!maps.ok()) return maps.status();
  if (attached_) process.attach_maps = std::move(*maps);
  return absl::OkStatus();
}

absl::Status SidebandSession::ReadAttachState(Process& process) {
  // /proc is read after the events exist, so a mapping made in between is seen twice
  // (synthesized and real) rather than not at all.
  absl::StatusOr<std::vector<ThreadComm>> threads = ReadThreadComms(process.target->pid());
  if (!threads.ok()) return threads.status();
  process.attach_threads = std::move(*threads);
  return DumpMemory(process);
}

absl::Status SidebandSession::AddProcess(int pid) {
  if (!attached_) return absl::FailedPreconditionError("SidebandSession::AddProcess: not attached");
  absl::StatusOr<TargetProcess> target = TargetProcess::Attach(pid);
  if (!target.ok()) return target.status();
  Process process{std::make_unique<TargetProcess>(std::move(*target)), {}, {}};
  absl::StatusOr<std::vector<int>> tids = process.target->Threads();
  if (!tids.ok()) return tids.status();
  for (int tid : *tids) {
    if (absl::Status st = recorder_->AddThread(tid); !st.ok()) return st;
  }
  if (absl::Status st = ReadAttachState(process); !st.ok()) return st;
  targets_.push_back(std::move(process));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SidebandSession>> SidebandSession::Launch(
    const std::vector<std::string>& argv, const SidebandSessionOptions& options,
    const TraceDirWriter& dir) {
  std::unique_ptr<SidebandSession> session(new SidebandSession(options, dir));
  LaunchOptions launch;
  launch.argv = argv;
  launch.stop_at_exec = true;
  absl::StatusOr<TargetProcess> target = TargetProcess::Launch(launch);
  if (!target.ok()) return target.status();
  session->targets_.push_back({std::make_unique<TargetProcess>(std::move(*target)), {}, {}});
  TargetProcess& launched = session->target();

  SidebandRecorderOptions rec_options = options.sideband;
  rec_options.enable_on_exec = true;
  session->attach_clock_ns_ = ClockNs(rec_options.clockid);
  absl::StatusOr<std::unique_ptr<SidebandRecorder>> recorder =
      SidebandRecorder::Open({launched.pid()}, rec_options, dir);
  if (!recorder.ok()) return recorder.status();
  session->recorder_ = std::move(*recorder);
  if (absl::Status st = session->recorder_->Start(); !st.ok()) return st;
  if (absl::Status st = launched.Release(); !st.ok()) return st;
  // Stopped right after exec: the new image's vDSO is mapped and nothing has run.
  if (absl::Status st = session->DumpMemory(session->targets_.front()); !st.ok()) return st;
  if (!options.keep_traced) {
    if (absl::Status st = launched.Detach(); !st.ok()) return st;
  }
  return session;
}

absl::StatusOr<std::unique_ptr<SidebandSession>> SidebandSession::Attach(
    const std::vector<int>& pids, const SidebandSessionOptions& options, const TraceDirWriter& dir) {
  std::unique_ptr<SidebandSession> session(new SidebandSession(options, dir));
  session->attached_ = true;
  if (pids.empty()) return absl::InvalidArgumentError("SidebandSession::Attach: no process");
  std::vector<int> tids;
  for (int pid : pids) {
    absl::StatusOr<TargetProcess> target = TargetProcess::Attach(pid);
    if (!target.ok()) return target.status();
    session->targets_.push_back({std::make_unique<TargetProcess>(std::move(*target)), {}, {}});
    absl::StatusOr<std::vector<int>> threads = session->targets_.back().target->Threads();
    if (!threads.ok()) return threads.status();
    tids.insert(tids.end(), threads->begin(), threads->end());
  }

  SidebandRecorderOptions rec_options = options.sideband;
  rec_options.enable_on_exec = false;
  session->attach_clock_ns_ = ClockNs(rec_options.clockid);
  absl::StatusOr<std::unique_ptr<SidebandRecorder>> recorder =
      SidebandRecorder::Open(tids, rec_options, dir);
  if (!recorder.ok()) return recorder.status();
  session->recorder_ = std::move(*recorder);
  if (absl::Status st = session->recorder_->Enable(); !st.ok()) return st;
  if (absl::Status st = session->recorder_->Start(); !st.ok()) return st;
  for (Process& process : session->targets_) {
    if (absl::Status st = session->ReadAttachState(process); !st.ok()) return st;
  }
  return session;
}

absl::Status SidebandSession::Finish(TraceMeta* meta) {
  if (finished_) return absl::FailedPreconditionError("sideband session already finished");
  finished_ = true;
  absl::Status status = recorder_->Stop();
  if (!status.ok()) {
    notes_.push_back(absl::StrCat("sideband recording error (what was read is kept): ",
                                  std::string(status.message())));
  }
  std::vector<SidebandFile> files = recorder_->Files();
  TimeRange range = RecordedTimeRange(dir_, files);

  // perf record -p stamps synthesized records before every real one.
  const uint64_t synth_time = range.empty() ? attach_clock_ns_ : range.first - 1;
  for (Process& process : targets_) {
    if (!attached_) break;
    const int pid = process.target->pid();
    ProcSynthOptions synth;
    synth.format = RecordFormat{kSidebandSampleType, true};
    synth.time_ns = synth_time;
    synth.id = recorder_->first_event_id();
    SynthesizedSideband records = SynthesizeRecords(pid, process.attach_maps, process.attach_threads, synth);
    SidebandFile f;
    f.file = absl::StrCat(kSidebandSubdir, "/synth.", pid, ".data");
    f.origin = "synthesized";
    f.sample_type = kSidebandSampleType;
    f.sample_id_all = true;
    absl::Status st = WriteFileAtomic(dir_.FilePath(f.file), absl::MakeConstSpan(records.bytes));
    if (st.ok()) {
      // Synthesized records go first: readers merge by time, synthesized first on ties.
      files.insert(files.begin(), std::move(f));
      if (range.empty()) range.first = range.last = synth.time_ns;
      range.first = std::min(range.first, synth.time_ns);
    } else {
      notes_.push_back(absl::StrCat("synthesized sideband not written: ", std::string(st.message())));
      status.Update(st);
    }
  }
  DataRingStats stats = recorder_->TotalStats();
  if (stats.lost_records > 0) {
    notes_.push_back(absl::StrFormat(
        "the kernel dropped %d sideband records (%d PERF_RECORD_LOST); use a larger DATA ring",
        stats.lost_records, stats.lost_events));
  }

  if (meta->tool_version.empty()) meta->tool_version = kToolVersion;
  if (meta->host.kernel_release.empty()) meta->host = ReadHostInfo();
  if (meta->command.empty()) meta->command = target().argv();
  for (Process& process : targets_) {
    const int pid = process.target->pid();
    if (std::find(meta->pids.begin(), meta->pids.end(), pid) == meta->pids.end()) meta->pids.push_back(pid);
  }
  meta->per = options_.sideband.per_cpu ? "cpu" : "thread";
  meta->sideband.insert(meta->sideband.end(), files.begin(), files.end());
  meta->images.insert(meta->images.end(), images_.begin(), images_.end());
  meta->notes.insert(meta->notes.end(), notes_.begin(), notes_.end());
  ArchiveJitFiles(dir_, meta);
  if (!range.empty()) {
    if (meta->start_ns == 0 || range.first < meta->start_ns) meta->start_ns = range.first;
    meta->end_ns = std::max(meta->end_ns, range.last);
  }
  return status;
}

}  // namespace ptd
