#include "recorder/pt/pt_recording.h"
#include "common/monotonic_clock.h"

#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "recorder/sideband/data_ring.h"
#include "recorder/sideband/perf_event.h"
#include "recorder/sideband/perf_mmap.h"
#include "recorder/sideband/proc_maps.h"
#include "recorder/sideband/proc_synth.h"
#include "recorder/pt/ip_filter.h"
#include "recorder/pt/perf_access.h"
#include "recorder/pt/ring_sizes.h"
#include "recorder/sideband/sideband_events.h"
#include "recorder/sideband/sideband_recorder.h"
#include "recorder/images/kernel_images.h"
#include "recorder/images/trace_archive.h"
#include "recorder/images/vdso_dump.h"
#include "sideband/record_reader.h"

namespace ptd::pt {

static void RaiseOpenFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &limit);  // if refused, EMFILE's message says what to do
}

uint64_t PtRecording::Now() const {
  // The first ring's conversion, kept: that ring may be released before the end.
  return clock_page_set_ ? EventClockNow(&clock_page_, clock_offset_) : PerfClockNs();
}

absl::StatusOr<PtPmuInfo> CheckPtRecordable(const PtRecordingOptions& options,
                                            PtEventConfig* config_out) {
  const RecordOptions& record = options.record;
  absl::StatusOr<PtPmuInfo> pmu = DiscoverPtPmu(options.sysfs_root);
  if (!pmu.ok()) return pmu.status();
  if (absl::Status st = CheckPerfAccess(ReadPerfAccess(options.proc_root), record.kernel,
                                        !record.cgroup.empty());
      !st.ok()) {
    return st;
  }
  absl::StatusOr<PtEventConfig> config =
      BuildPtEventConfig(*pmu, record.timing, record.pt_config, record.kernel);
  if (!config.ok()) return config.status();
  if (record.snapshot) {
    if (absl::Status st = CheckRingBytes(record.snapshot_size, "--snapshot-size"); !st.ok()) {
      return st;
    }
  } else if (absl::Status st = CheckRingBytes(record.buffer_size, "--buffer-size"); !st.ok()) {
    return st;
  }
  if (absl::Status st = CheckRingBytes(record.data_size, "--data-size"); !st.ok()) return st;
  if (!record.filter.empty() && pmu->Cap("ip_filtering") == 0 &&
      pmu->caps.count("ip_filtering") != 0) {
    return absl::FailedPreconditionError("--filter: this CPU has no IP filtering (caps/ip_filtering is 0)");
  }
  if (options.self_tids.empty()) {
    if (absl::Status st = CheckTargetOptions(record); !st.ok()) return st;
  }
  if (!record.cgroup.empty() && record.per_thread) {
    return absl::InvalidArgumentError(
        "--cgroup needs per-CPU rings (the kernel counts a cgroup per CPU); drop --per-thread");
  }
  if (!record.cgroup.empty() && !record.filter.empty()) {
    // perf_event_set_addr_filter / perf_event_parse_addr_filter: EOPNOTSUPP without a
    // task context, since the same file maps at different addresses in each process.
    return absl::InvalidArgumentError(
        "--filter with --cgroup: the kernel takes address filters only on per-task events, "
        "and a cgroup's events are per CPU; record its processes with --pid instead");
  }
  if (config_out != nullptr) *config_out = *config;
  return pmu;
}

PtRecording::PtRecording(PtRecordingOptions options, PtRingFactory* factory,
                         const TraceDirWriter& dir)
    : options_(std::move(options)), factory_(factory), dir_(dir) {}

PtRecording::~PtRecording() {
  for (auto& capture : captures_) (void)capture->Close();
}

absl::StatusOr<std::unique_ptr<PtRecording>> PtRecording::Start(
    const PtRecordingOptions& options, PtRingFactory* factory, const TraceDirWriter& dir) {
  PtRecordingOptions sized = options;
  const PerfAccess access = ReadPerfAccess(options.proc_root);
  absl::StatusOr<std::vector<int>> online = OnlineCpus();
  const size_t cpu_count = online.ok() ? online->size() : 1;
  sized.record = WithRingSizes(options.record, access, cpu_count);
  std::unique_ptr<PtRecording> rec(new PtRecording(sized, factory, dir));
  absl::StatusOr<PtPmuInfo> pmu = CheckPtRecordable(sized, &rec->config_);
  if (!pmu.ok()) return pmu.status();
  rec->pmu_ = *std::move(pmu);
  rec->notes_ = rec->config_.notes;
  const RecordOptions& record = sized.record;
  if (record.buffer_size != options.record.buffer_size && !access.mlock_unlimited()) {
    rec->notes_.push_back(
        "rings sized for the locked-memory limit (no CAP_IPC_LOCK): 128 KiB AUX, 256 KiB "
        "DATA, as perf does; give --buffer-size/--snapshot-size/--data-size to choose");
  }

  const bool launch = options.self_tids.empty() && !record.command.empty();
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.type = static_cast<uint32_t>(rec->pmu_.type);
  attr.config = rec->config_.words[0];
  attr.config1 = rec->config_.words[1];
  attr.config2 = rec->config_.words[2];
  attr.exclude_kernel = record.kernel ? 0 : 1;
  attr.exclude_hv = 1;
  SidebandEventOptions sideband;
  sideband.per_cpu = !record.per_thread;
  sideband.enable_on_exec = launch;
  // The PT event carries no sideband: it is disabled at each snapshot (and by the kernel
  // after a truncation), and a disabled event gets none. A dummy event does, as perf's
  // dummy:u; both write into the same ring.
  AddEventCommonFields(sideband, &attr);
  rec->tracking_attr_ = DummySidebandAttr(sideband);
  if (!record.follow_children) {
    // Inherited per-CPU events would follow children as well as threads: with
    // --no-follow none inherit, and each new thread of a target gets its own events
    // (FollowNewTasks).
    attr.inherit = 0;
    rec->tracking_attr_.inherit = 0;
  }
  // Linear mode: wake the reader when a quarter of the AUX ring is full, so it drains
  // long before the kernel has to drop anything.
  if (!record.snapshot) attr.aux_watermark = static_cast<uint32_t>(record.buffer_size / 4);

  std::vector<int> tids = options.self_tids;
  int pid = options.self_tids.empty() ? -1 : static_cast<int>(getpid());
  if (launch) {
    LaunchOptions launch_options;
    launch_options.argv = record.command;
    launch_options.stop_at_exec = true;  // dump the new image's vDSO before it runs
    absl::StatusOr<TargetProcess> target = TargetProcess::Launch(launch_options);
    if (!target.ok()) return target.status();
    rec->targets_.push_back(std::make_unique<TargetProcess>(*std::move(target)));
    pid = rec->targets_.front()->pid();
    tids = {pid};
  } else if (options.self_tids.empty()) {
    absl::StatusOr<std::vector<int>> attach = ProcessesToAttach(record);
    if (!attach.ok()) return attach.status();
    for (int attach_pid : *attach) {
      absl::StatusOr<TargetProcess> target = TargetProcess::Attach(attach_pid);
      if (!target.ok()) return target.status();
      rec->targets_.push_back(std::make_unique<TargetProcess>(*std::move(target)));
      if (!record.cgroup.empty()) continue;  // the cgroup's events follow its tasks
      absl::StatusOr<std::vector<int>> threads = rec->targets_.back()->Threads();
      if (!threads.ok()) return threads.status();
      tids.insert(tids.end(), threads->begin(), threads->end());
    }
    pid = attach->front();
  }
  if (!record.filter.empty()) {
    // The kernel takes numeric file-offset ranges only: resolve names in the target's
    // executable (or the @FILE given) now that it is loaded.
    // A launched child has not exec'd yet (its /proc/PID/exe is still this program): its
    // executable is the command's, found as exec will find it.
    std::string exe_path;
    if (launch) {
      absl::StatusOr<std::string> command = ResolveExecutable(record.command.front());
      if (!command.ok()) return command.status();
      exe_path = *command;
    } else {
      char exe[PATH_MAX];
      const std::string link = absl::StrCat("/proc/", pid, "/exe");
      const ssize_t n = readlink(link.c_str(), exe, sizeof(exe) - 1);
      if (n > 0) exe_path.assign(exe, static_cast<size_t>(n));
    }
    absl::StatusOr<std::string> resolved =
        ResolveIpFilter(record.filter, exe_path, rec->pmu_.Cap("num_address_ranges"));
    if (!resolved.ok()) return resolved.status();
    rec->options_.record.filter = *resolved;
  }
  rec->attr_ = attr;
  for (const auto& target : rec->targets_) rec->target_pids_.push_back(target->pid());
  // Two events per thread per CPU (per-CPU attach) soon pass a default soft limit of
  // 1024 fds: raise it to the hard limit as perf does (rlimit__increase_nofile). The
  // launched child was forked before and keeps its own limit.
  RaiseOpenFileLimit();
  if (record.per_thread) {
    const RecordOptions fitted = WithPerThreadRingSizes(record, access, tids.size(), cpu_count);
    if (fitted.data_size != record.data_size || fitted.buffer_size != record.buffer_size ||
        fitted.snapshot_size != record.snapshot_size) {
      rec->notes_.push_back(absl::StrCat(
          "rings sized for ", tids.size(), " threads and as many new ones within the locked-memory "
          "budget (kernel.perf_event_mlock_kb per CPU, shared by every ring): ",
          (fitted.snapshot ? fitted.snapshot_size : fitted.buffer_size) >> 10, " KiB AUX, ",
          fitted.data_size >> 10, " KiB DATA each"));
      rec->options_.record.data_size = fitted.data_size;
      rec->options_.record.buffer_size = fitted.buffer_size;
      rec->options_.record.snapshot_size = fitted.snapshot_size;
    }
  }
  if (!record.cgroup.empty()) {
    if (absl::Status st = rec->OpenCgroupRings(record.cgroup); !st.ok()) return st;
  } else if (absl::Status st = rec->OpenRings(tids); !st.ok()) {
    return st;
  }
  rec->start_ns_ = rec->Now();

  if (launch) {
    if (absl::Status st = rec->target()->Release(); !st.ok()) return st;
    absl::Status dumped = rec->DumpTargetMemory(pid);
    if (!dumped.ok()) rec->notes_.push_back(absl::StrCat("vDSO dump: ", dumped.message()));
    if (options.before_run) {
      if (absl::Status st = options.before_run(pid); !st.ok()) return st;
    }
    if (absl::Status st = rec->target()->Detach(); !st.ok()) return st;
  } else {
    // Read before the events are enabled, so the synthesized records precede every real
    // one, on the events' own clock.
    const uint64_t synth_time = rec->Now();
    for (auto& capture : rec->captures_) {
      if (absl::Status st = factory->Enable(capture->ring()); !st.ok()) return st;
    }
    // The kernel only reports mappings made from now on: describe the existing ones.
    for (int target_pid : rec->target_pids_) {
      if (absl::Status st = rec->DescribeRunningProcess(target_pid, synth_time); !st.ok()) return st;
    }
    rec->cgroup_read_ns_ = synth_time;
  }
  return rec;
}

absl::Status PtRecording::DescribeRunningProcess(int pid, uint64_t time_ns) {
  ProcSynthOptions synth_options;
  synth_options.format.sample_type = kSidebandSampleType;
  synth_options.format.sample_id_all = true;
  synth_options.time_ns = time_ns;
  absl::StatusOr<SynthesizedSideband> synth = SynthesizeProcess(pid, synth_options);
  if (!synth.ok()) return synth.status();
  SidebandFile file;
  file.file = absl::StrCat(kSidebandSubdir, "/synth.", pid, ".data");
  file.origin = "synthesized";
  file.sample_type = kSidebandSampleType;
  if (absl::Status st = MakeDirs(dir_.FilePath(kSidebandSubdir)); !st.ok()) return st;
  if (absl::Status st = WriteFileAtomic(dir_.FilePath(file.file), absl::MakeConstSpan(synth->bytes)); !st.ok()) {
    return st;
  }
  extra_sideband_.push_back(file);
  absl::Status dumped = DumpTargetMemory(pid);
  if (!dumped.ok()) notes_.push_back(absl::StrCat("vDSO dump: ", dumped.message()));
  return absl::OkStatus();
}

void PtRecording::DescribeCgroupNewcomers() {
  if (options_.record.cgroup.empty()) return;
  const uint64_t now = Now();
  absl::StatusOr<std::vector<int>> pids = CgroupProcesses(options_.record.cgroup);
  if (pids.ok()) {
    for (int pid : *pids) {
      if (std::find(target_pids_.begin(), target_pids_.end(), pid) != target_pids_.end()) continue;
      target_pids_.push_back(pid);  // described once, even when that fails
      // It joined after the previous read: stamped then, before any of its trace here.
      absl::Status st = DescribeRunningProcess(pid, cgroup_read_ns_);
      notes_.push_back(st.ok() ? absl::StrCat("process ", pid, " joined ", options_.record.cgroup,
                                              " while recording: described from /proc when seen")
                               : absl::StrCat("process ", pid, " joined ", options_.record.cgroup,
                                              " but could not be described: ", st.message()));
    }
  }
  cgroup_read_ns_ = now;
}

absl::Status PtRecording::DumpTargetMemory(int pid) {
  return DumpSpecialMemoryOf(pid, dir_, &images_, &notes_).status();
}

absl::Status PtRecording::Snapshot(const std::string& reason) {
  absl::Status status = absl::OkStatus();
  auto keep_first = [&status](const absl::Status& st) {
    if (!st.ok() && status.ok()) status = st;
  };
  // One cut: every ring stops before any is read, so no CPU holds trace from after the
  // trigger; then all are read, then all resume. Only the PT events stop: the tracking
  // events keep writing sideband meanwhile. In linear mode too: the kernel publishes
  // aux_head only at the wakeup watermark and when the event stops (perf_aux_output_end
  // from the PMI or pt_event_stop), so without the stop up to a watermark of the newest
  // trace per ring would be missing from this read, and from the last one.
  std::vector<size_t> exited;
  for (size_t i = 0; i < captures_.size(); ++i) {
    if (ThreadExited(*captures_[i])) exited.push_back(i);
  }
  for (auto& capture : captures_) keep_first(capture->ring().DisablePt());
  const uint64_t now = Now();
  for (auto& capture : captures_) keep_first(capture->Snapshot(reason, now));
  // Also the enable a linear ring the kernel disabled at a truncation needs.
  for (auto& capture : captures_) keep_first(capture->ring().EnablePt());
  // Rings of threads that had exited before this read hold nothing more.
  for (auto it = exited.rbegin(); it != exited.rend(); ++it) keep_first(RetireCapture(*it));
  snapshots_++;
  return status;
}

absl::Status PtRecording::EnableAfterTruncation(PtStreamCapture& capture, uint64_t lost_before,
                                                uint64_t sideband_lost_before,
                                                uint64_t full_reads_before) {
  // A full linear AUX ring makes the kernel disable the PT event (TRUNCATED sets
  // pending_disable); enable it again now that there is room (the chunk already says that
  // trace was lost). Sideband went on meanwhile on the tracking event. The TRUNCATED
  // PERF_RECORD_AUX itself may be what a full DATA ring dropped: lost records are then
  // taken as a possible truncation too (IOC_ENABLE on an enabled event does nothing).
  // A ring found (nearly) full may also have had its event disabled with no record at
  // all: perf_aux_output_begin with no room sets pending_disable and writes nothing.
  if (options_.record.snapshot) return absl::OkStatus();
  if (capture.lost_chunks() == lost_before &&
      capture.sideband_lost_records() == sideband_lost_before &&
      capture.full_reads() == full_reads_before) {
    return absl::OkStatus();
  }
  return capture.ring().EnablePt();
}

absl::Status PtRecording::Drain() {
  const uint64_t now = Now();
  absl::Status status = absl::OkStatus();
  // Rings opened below are drained from the next call on.
  const size_t existing = captures_.size();
  std::vector<size_t> exited;
  for (size_t i = 0; i < existing; ++i) {
    auto& capture = captures_[i];
    // Seen before the read: the thread's last trace is in what this read takes. A
    // snapshot ring is kept for the next snapshot, which releases it.
    if (!options_.record.snapshot && ThreadExited(*capture)) exited.push_back(i);
    const uint64_t lost_before = capture->lost_chunks();
    const uint64_t sideband_lost_before = capture->sideband_lost_records();
    const uint64_t full_reads_before = capture->full_reads();
    absl::Status st = capture->Drain(now);
    if (!st.ok() && status.ok()) status = st;
    st = EnableAfterTruncation(*capture, lost_before, sideband_lost_before, full_reads_before);
    if (!st.ok() && status.ok()) status = st;
  }
  // Their locked memory and fds go back before new rings are opened below.
  for (auto it = exited.rbegin(); it != exited.rend(); ++it) {
    absl::Status st = RetireCapture(*it);
    if (!st.ok() && status.ok()) status = st;
  }
  absl::Status followed = FollowNewTasks();
  DescribeCgroupNewcomers();
  return status.ok() ? followed : status;
}

std::vector<int> PtRecording::WakeupFds() const {
  std::vector<int> fds;
  for (const auto& capture : captures_) {
    for (int fd : const_cast<PtStreamCapture&>(*capture).ring().poll_fds()) {
      if (fd >= 0) fds.push_back(fd);
    }
  }
  return fds;
}

RecordCounters PtRecording::counters() const {
  RecordCounters c;
  c.snapshots = options_.record.snapshot ? snapshots_ : 0;
  for (const auto& capture : captures_) {
    c.bytes += capture->aux_bytes();
    c.lost += capture->lost_chunks();
  }
  return c;
}

absl::Status PtRecording::Finish(const std::string& end_reason,
                                 const std::vector<std::string>& notes, TraceMeta* meta) {
  if (finished_) return absl::FailedPreconditionError("PtRecording::Finish called twice");
  finished_ = true;
  absl::Status status = absl::OkStatus();
  for (auto& capture : captures_) {
    absl::Status st = capture->Close();
    if (!st.ok() && status.ok()) status = st;
  }
  meta->host = ReadHostInfo();
  meta->mode = TraceMode::kHardware;
  PtSettings& pt = meta->pt;
  pt.pmu_type = pmu_.type;
  pt.config = config_.words[0];
  pt.fields = config_.fields;
  pt.timing = config_.timing;
  pt.user_only = config_.user_only;
  pt.ip_filter = options_.record.filter;
  pt.caps = pmu_.caps;
  const Cpuid15 cpuid15 = ReadCpuid15();
  pt.cpuid_0x15_eax = cpuid15.eax;
  pt.cpuid_0x15_ebx = cpuid15.ebx;
  pt.nom_freq = pmu_.max_nonturbo_ratio;
  if (auto it = config_.fields.find("mtc_period"); it != config_.fields.end()) {
    pt.mtc_freq = static_cast<uint32_t>(it->second);
  }
  pt.tsc_art_ratio_num = pmu_.tsc_art_ratio_num;
  pt.tsc_art_ratio_den = pmu_.tsc_art_ratio_den;
  if (auto it = config_.fields.find("psb_period"); it != config_.fields.end()) {
    pt.psb_period_bytes = 1ull << (it->second + 11);  // SDM: PSB every 2^(n+11) bytes
  }
  meta->time = time_;
  meta->command = options_.record.command;
  meta->pids = target_pids_;
  if (!options_.self_tids.empty()) meta->pids = {static_cast<int>(getpid())};
  meta->per = options_.record.per_thread ? "thread" : "cpu";
  meta->streams = retired_streams_;
  meta->sideband = retired_sideband_;
  for (const auto& capture : captures_) {
    meta->streams.push_back(capture->stream());
    meta->sideband.push_back(capture->sideband());
  }
  meta->sideband.insert(meta->sideband.end(), extra_sideband_.begin(), extra_sideband_.end());
  meta->images.insert(meta->images.end(), images_.begin(), images_.end());
  meta->end_reason = end_reason;
  meta->notes = notes_;
  meta->notes.insert(meta->notes.end(), notes.begin(), notes.end());
  meta->start_ns = start_ns_;
  meta->end_ns = Now();
  ArchiveMappedFiles(dir_, {options_.record.archive, options_.record.archive_cache_dir, nullptr, options_.record.debuginfod},
                     meta);
  if (options_.record.kernel) {
    KernelImageSources sources;
    sources.proc_root = options_.proc_root;
    const std::string missing = CaptureKernelImages(dir_, sources, meta);
    if (!missing.empty() && !options_.record.quiet) std::fprintf(stderr, "ptrace-direct: warning: %s\n", missing.c_str());
  }
  return status;
}

}  // namespace ptd::pt
