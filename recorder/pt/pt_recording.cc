#include "recorder/pt/pt_recording.h"
#include "common/monotonic_clock.h"

#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>
#include <x86intrin.h>

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
#include "recorder/sideband/sideband_events.h"
#include "recorder/sideband/sideband_recorder.h"
#include "recorder/images/kernel_images.h"
#include "recorder/images/trace_archive.h"
#include "recorder/images/vdso_dump.h"
#include "sideband/record_reader.h"

namespace ptd::pt {
namespace {

absl::Status CheckRingBytes(uint64_t bytes, const char* option) {
  const uint64_t page = PageSize();
  const uint64_t pages = bytes / page;
  if (bytes == 0 || bytes % page != 0 || (pages & (pages - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, " ", bytes, ": must be a power-of-two number of ", page, "-byte pages"));
  }
  return absl::OkStatus();
}

std::string StreamName(int cpu, int tid) {
  return cpu >= 0 ? absl::StrCat("cpu", cpu) : absl::StrCat("tid", tid);
}

}  // namespace

uint64_t PerfClockNs() { return MonotonicNs(); }

absl::StatusOr<int64_t> MeasurePerfClockOffset() {
  // A dummy event on this thread that reports COMM; renaming the thread (to its own
  // name) makes the kernel write one, stamped with the perf clock, between two
  // CLOCK_MONOTONIC reads.
  SidebandEventOptions options;
  options.per_cpu = false;
  options.context_switches = false;
  perf_event_attr attr = DummySidebandAttr(options);
  attr.mmap = attr.mmap2 = attr.task = 0;
  absl::StatusOr<PerfEvent> event = PerfEvent::Open(attr, 0, -1);
  if (!event.ok()) return event.status();
  absl::StatusOr<PerfMmap> ring = PerfMmap::Map(*event, PageSize());
  if (!ring.ok()) return ring.status();
  char name[32] = {};
  if (prctl(PR_GET_NAME, name) != 0) return ErrnoError("prctl", "PR_GET_NAME", errno);
  if (absl::Status st = event->Enable(); !st.ok()) return st;
  const uint64_t before = PerfClockNs();
  const int renamed = prctl(PR_SET_NAME, name);
  const uint64_t after = PerfClockNs();
  (void)event->Disable();
  if (renamed != 0) return ErrnoError("prctl", "PR_SET_NAME", errno);
  std::string bytes;
  DataRingStats stats;
  DataRing data(ring->header(), ring->data(), ring->data_size());
  if (absl::Status st = data.Drain(&bytes, &stats); !st.ok()) return st;
  RecordFormat format;
  format.sample_type = attr.sample_type;
  format.sample_id_all = true;
  RecordReader reader(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()),
                                          bytes.size()),
                      "perf clock probe", format);
  while (true) {
    absl::StatusOr<std::optional<PerfRecord>> record = reader.Next();
    if (!record.ok()) return record.status();
    if (!record->has_value()) break;
    if (std::holds_alternative<CommRecord>((*record)->body) && (*record)->sample_id.has_time) {
      return static_cast<int64_t>((*record)->sample_id.time - (before + (after - before) / 2));
    }
  }
  return absl::NotFoundError("perf clock probe: the kernel wrote no COMM record");
}

static void RaiseOpenFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &limit);  // if refused, EMFILE's message says what to do
}

namespace {

// The page's TSC conversion, read consistently: the kernel updates it under a sequence
// count (perf_event_mmap_page.lock), odd while it writes (perf_event_update_userpage);
// retry until the same even value is seen before and after, as perf_read_tsc_conversion
// does.
perf_event_mmap_page ReadTscConversion(const perf_event_mmap_page* header) {
  perf_event_mmap_page out{};
  uint32_t seq = 0;
  do {
    seq = __atomic_load_n(&header->lock, __ATOMIC_ACQUIRE);
    out.cap_user_time_zero = header->cap_user_time_zero;
    out.time_zero = header->time_zero;
    out.time_mult = header->time_mult;
    out.time_shift = header->time_shift;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
  } while ((seq & 1) != 0 || __atomic_load_n(&header->lock, __ATOMIC_RELAXED) != seq);
  return out;
}

}  // namespace

bool HasTscConversion(const perf_event_mmap_page* header) {
  const perf_event_mmap_page conversion = ReadTscConversion(header);
  return conversion.cap_user_time_zero && conversion.time_mult != 0;
}

uint64_t EventClockNow(const perf_event_mmap_page* header, int64_t offset_without_tsc) {
  const perf_event_mmap_page conversion = ReadTscConversion(header);
  const uint64_t zero = conversion.time_zero;
  const uint32_t mult = conversion.time_mult;
  const uint16_t shift = conversion.time_shift;
  if (!conversion.cap_user_time_zero || mult == 0) {
    // No TSC conversion offered (VMs without a stable TSC): CLOCK_MONOTONIC moved onto
    // the perf clock (local_clock) by the measured offset.
    return PerfClockNs() + static_cast<uint64_t>(offset_without_tsc);
  }
  const uint64_t tsc = __rdtsc();
  const uint64_t quot = tsc >> shift;
  const uint64_t rem = tsc & ((1ull << shift) - 1);
  return zero + quot * mult + ((rem * mult) >> shift);
}

RecordOptions WithRingSizes(const RecordOptions& record, const PerfAccess& access, size_t cpus) {
  RecordOptions out = record;
  if (!record.default_ring_sizes) return out;
  if (access.mlock_unlimited()) {
    // One full-trace ring per CPU: 16 MiB each up to 16 CPUs, then 256 MiB shared out,
    // never below perf's 4 MiB for privileged users (intel_pt_recording_options).
    if (!record.per_thread && !record.snapshot) {
      uint64_t per_ring = 16ull << 20;
      while (per_ring > (4ull << 20) && per_ring * std::max<size_t>(cpus, 1) > (256ull << 20)) per_ring /= 2;
      out.buffer_size = per_ring;
    }
    return out;
  }
  // perf's sizes for users under the locked-memory limit (tools/perf/arch/x86/util/
  // intel-pt.c, intel_pt_recording_options): the kernel allows perf_event_mlock_kb
  // (516 KiB by default) per CPU beyond RLIMIT_MEMLOCK, and 16 MiB rings fail with EPERM.
  out.snapshot_size = 128 << 10;
  out.buffer_size = 128 << 10;
  out.data_size = 256 << 10;
  return out;
}

RecordOptions WithPerThreadRingSizes(const RecordOptions& record, const PerfAccess& access,
                                     size_t threads, size_t cpus) {
  RecordOptions out = record;
  if (!record.per_thread || !record.default_ring_sizes || access.mlock_unlimited()) return out;
  // perf_mmap charges every ring of the user against one budget of perf_event_mlock_kb
  // per online CPU; per-CPU mode opens one ring per CPU, per-thread mode one per thread.
  // Room for the threads there now and as many again created while recording.
  const uint64_t page = PageSize();
  const uint64_t budget = access.mlock_kb * 1024 * std::max<size_t>(cpus, 1);
  const uint64_t per_ring = budget / (2 * std::max<size_t>(threads, 1));
  uint64_t& aux = record.snapshot ? out.snapshot_size : out.buffer_size;
  while (page + aux + out.data_size > per_ring && (aux > page || out.data_size > page)) {
    // Halve the larger (the AUX area first on a tie): both stay powers of two pages.
    if (aux >= out.data_size && aux > page) {
      aux /= 2;
    } else {
      out.data_size /= 2;
    }
  }
  return out;
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

absl::Status PtRecording::AddCapture(std::unique_ptr<PtRingSource> ring) {
  const std::string name = StreamName(ring->cpu(), ring->tid());
  if (captures_.empty()) {
    const perf_event_mmap_page* h = ring->header();
    time_.time_shift = h->time_shift;
    time_.time_mult = h->time_mult;
    time_.time_zero = h->time_zero;
    time_.cap_user_time_zero = h->cap_user_time_zero;
    clock_page_.cap_user_time_zero = h->cap_user_time_zero;
    clock_page_.time_zero = h->time_zero;
    clock_page_.time_mult = h->time_mult;
    clock_page_.time_shift = h->time_shift;
    clock_page_set_ = true;
    if (!HasTscConversion(h)) {
      // Records synthesized from /proc and chunk times must be on the kernel's
      // local_clock() to sort among the kernel's records.
      absl::StatusOr<int64_t> offset = options_.measure_perf_clock_offset();
      if (offset.ok()) {
        clock_offset_ = *offset;
      } else {
        notes_.push_back(absl::StrCat(
            "perf clock: the event page offers no TSC conversion and measuring the perf "
            "clock's offset from CLOCK_MONOTONIC failed (", offset.status().message(),
            "); records synthesized from /proc and chunk times are CLOCK_MONOTONIC, which "
            "the kernel's timestamps (local_clock) can differ from"));
      }
    }
  }
  auto capture = std::make_unique<PtStreamCapture>(
      std::move(ring),
      StreamFiles{dir_.staging_dir(), absl::StrCat(kAuxSubdir, "/", name, ".pt"),
                  absl::StrCat(kSidebandSubdir, "/", name, ".data")},
      kSidebandSampleType);
  if (absl::Status st = capture->Open(); !st.ok()) return st;
  captures_.push_back(std::move(capture));
  return absl::OkStatus();
}

PtRingRequest PtRecording::RingRequest() const {
  const RecordOptions& record = options_.record;
  PtRingRequest request;
  request.attr = attr_;
  request.tracking_attr = tracking_attr_;
  request.data_size = record.data_size;
  request.aux_size = record.snapshot ? record.snapshot_size : record.buffer_size;
  request.overwrite = record.snapshot;
  request.filter = record.filter;
  return request;
}

absl::Status PtRecording::OpenRings(const std::vector<int>& tids) {
  const RecordOptions& record = options_.record;
  const PtRingRequest base = RingRequest();
  // A thread that exits while we open its events (ESRCH: NotFound) is not worth failing
  // the recording for, as perf tolerates it; its trace is simply absent.
  auto vanished = [&](int tid, const absl::Status& st) {
    if (st.code() != absl::StatusCode::kNotFound) return false;
    notes_.push_back(absl::StrCat("thread ", tid, " exited before it was traced"));
    return true;
  };
  if (record.per_thread) {
    for (int tid : tids) {
      PtRingRequest request = base;
      request.attr.inherit = 0;  // the kernel refuses to mmap inherited per-task events
      request.tracking_attr.inherit = 0;
      request.cpu = -1;
      request.tid = tid;
      absl::StatusOr<std::unique_ptr<PtRingSource>> ring = factory_->Open(request);
      if (!ring.ok()) {
        if (vanished(tid, ring.status())) continue;
        return ring.status();
      }
      if (absl::Status st = AddCapture(*std::move(ring)); !st.ok()) return st;
      traced_tids_.push_back(tid);
    }
  } else {
    // Online CPUs, not configured ones: perf_event_open fails on an offline CPU.
    absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
    if (!cpus.ok()) return cpus.status();
    for (int cpu : *cpus) {
      std::unique_ptr<PtRingSource> ring;
      for (int tid : tids) {
        absl::Status st;
        if (ring == nullptr) {
          PtRingRequest request = base;
          request.cpu = cpu;
          request.tid = tid;
          absl::StatusOr<std::unique_ptr<PtRingSource>> opened = factory_->Open(request);
          if (opened.ok()) ring = *std::move(opened);
          st = opened.status();
        } else {
          st = factory_->AddThread(*ring, tid);
        }
        // Each thread is noted once, on the first CPU.
        if (!st.ok() && st.code() == absl::StatusCode::kNotFound && cpu != cpus->front()) {
          continue;
        }
        if (!st.ok() && !vanished(tid, st)) return st;
      }
      if (ring == nullptr) continue;
      if (absl::Status st = AddCapture(std::move(ring)); !st.ok()) return st;
    }
  }
  if (captures_.empty()) return absl::NotFoundError("no thread of the target could be traced");
  return absl::OkStatus();
}

absl::Status PtRecording::OpenCgroupRings(const std::string& cgroup) {
  // The kernel takes the cgroup as an fd of its directory, passed as the pid, with
  // PERF_FLAG_PID_CGROUP, and only per CPU (kernel/events/core.c, perf_event_open; perf's
  // -G). The events are only needed open: the fd is closed once they are.
  const int fd = ::open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("--cgroup: cannot open", cgroup, errno);
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  absl::Status status = cpus.status();
  for (size_t i = 0; status.ok() && i < cpus->size(); ++i) {
    PtRingRequest request = RingRequest();
    // CPU-wide events have no task to inherit from.
    request.attr.inherit = request.tracking_attr.inherit = 0;
    request.attr.enable_on_exec = request.tracking_attr.enable_on_exec = 0;
    request.cpu = (*cpus)[i];
    request.cgroup_fd = fd;
    absl::StatusOr<std::unique_ptr<PtRingSource>> ring = factory_->Open(request);
    if (!ring.ok()) {
      status = absl::Status(ring.status().code(), absl::StrCat("--cgroup ", cgroup, ": ", ring.status().message()));
      break;
    }
    status = AddCapture(*std::move(ring));
  }
  ::close(fd);
  return status;
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

bool PtRecording::IsTracedProcess(int pid) const {
  return std::find(target_pids_.begin(), target_pids_.end(), pid) != target_pids_.end() ||
         std::find(child_pids_.begin(), child_pids_.end(), pid) != child_pids_.end();
}

absl::Status PtRecording::FollowNewTasks() {
  std::vector<ForkRecord> forks;
  for (auto& capture : captures_) {
    std::vector<ForkRecord> taken = capture->TakeNewTasks();  // taken always: none piles up
    forks.insert(forks.end(), taken.begin(), taken.end());
  }
  // Inherited (per-CPU) events follow new tasks by themselves, and a cgroup's events
  // count all of its tasks.
  const bool inherited = !options_.record.per_thread && attr_.inherit;
  if (inherited || !options_.record.cgroup.empty() || target_pids_.empty()) {
    return absl::OkStatus();
  }
  std::vector<ForkRecord> fresh;
  for (const ForkRecord& fork : forks) {
    const int pid = static_cast<int>(fork.pid);
    const int tid = static_cast<int>(fork.tid);
    if (!IsTracedProcess(static_cast<int>(fork.ppid))) continue;
    if (fork.pid != fork.ppid) {
      // A child process (fork, vfork, clone without CLONE_THREAD). Only per-thread
      // mode gets here following children: per-CPU events inherit unless --no-follow.
      if (!options_.record.follow_children || IsTracedProcess(pid)) continue;
      child_pids_.push_back(pid);
    }
    if (std::find(traced_tids_.begin(), traced_tids_.end(), tid) != traced_tids_.end()) continue;
    if (std::none_of(fresh.begin(), fresh.end(),
                     [tid](const ForkRecord& f) { return static_cast<int>(f.tid) == tid; })) {
      fresh.push_back(fork);
    }
  }
  for (const ForkRecord& fork : fresh) {
    const int tid = static_cast<int>(fork.tid);
    const bool child = fork.pid != fork.ppid;
    const std::string what =
        child ? absl::StrCat("process ", fork.pid, " (a child of ", fork.ppid, ")")
              : absl::StrCat("thread ", tid);
    absl::Status st = options_.record.per_thread ? OpenThreadRing(tid) : AddThreadToCpuRings(tid);
    if (st.code() == absl::StatusCode::kNotFound) {
      notes_.push_back(absl::StrCat(what, " exited before it was traced"));
      continue;
    }
    if (!st.ok()) {
      // Out of locked memory or file descriptors: that task's trace is lost, the others'
      // are not.
      notes_.push_back(absl::StrCat(what, " not traced: ", st.message()));
      continue;
    }
    notes_.push_back(absl::StrCat(
        what, " was created while recording: traced from when its PERF_RECORD_FORK was read"));
    if (child) {
      // Its mappings are its parent's (the decoder copies them at the FORK); its vDSO is
      // dumped as the launched target's is.
      absl::Status dumped = DumpTargetMemory(static_cast<int>(fork.pid));
      if (!dumped.ok()) notes_.push_back(absl::StrCat("vDSO dump: ", dumped.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status PtRecording::OpenThreadRing(int tid) {
  // The thread runs already: no enable_on_exec, enabled explicitly once its ring exists.
  PtRingRequest request = RingRequest();
  request.attr.enable_on_exec = request.tracking_attr.enable_on_exec = 0;
  request.attr.inherit = request.tracking_attr.inherit = 0;
  request.cpu = -1;
  request.tid = tid;
  absl::StatusOr<std::unique_ptr<PtRingSource>> ring = factory_->Open(request);
  if (!ring.ok()) return ring.status();
  if (absl::Status st = AddCapture(*std::move(ring)); !st.ok()) return st;
  traced_tids_.push_back(tid);
  return factory_->Enable(captures_.back()->ring());
}

absl::Status PtRecording::AddThreadToCpuRings(int tid) {
  for (auto& capture : captures_) {
    if (absl::Status st = factory_->AddThread(capture->ring(), tid); !st.ok()) return st;
  }
  traced_tids_.push_back(tid);
  // The rings' other events are enabled already; this enables the new thread's (opened
  // disabled, as the ring's first were).
  for (auto& capture : captures_) {
    if (absl::Status st = factory_->Enable(capture->ring()); !st.ok()) return st;
  }
  return absl::OkStatus();
}

bool PtRecording::ThreadExited(PtStreamCapture& capture) {
  if (capture.ring().tid() < 0) return false;  // a per-CPU ring outlives any thread
  std::vector<pollfd> fds;
  for (int fd : capture.ring().poll_fds()) fds.push_back(pollfd{fd, 0, 0});
  if (fds.empty() || poll(fds.data(), fds.size(), 0) < 0) return false;
  return std::all_of(fds.begin(), fds.end(), [](const pollfd& p) { return (p.revents & POLLHUP) != 0; });
}

absl::Status PtRecording::RetireCapture(size_t i) {
  std::unique_ptr<PtStreamCapture> capture = std::move(captures_[i]);
  captures_.erase(captures_.begin() + static_cast<ptrdiff_t>(i));
  absl::Status st = capture->Close();
  retired_streams_.push_back(capture->stream());
  retired_sideband_.push_back(capture->sideband());
  notes_.push_back(absl::StrCat("thread ", capture->ring().tid(),
                                " exited while recording: its ring was read and released"));
  return st;
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
