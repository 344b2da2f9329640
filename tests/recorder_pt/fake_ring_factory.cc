#include "tests/recorder_pt/fake_ring_factory.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tests/recorder_pt/fake_address_filter.h"

#include "recorder/sideband/perf_event.h"
#include "recorder/sideband/perf_mmap.h"

namespace ptd::pt::testing {
namespace {

// attr bits that make the kernel write sideband for an event (perf_event_*_match).
bool AsksForSideband(const perf_event_attr& attr) {
  return attr.mmap || attr.mmap2 || attr.comm || attr.task || attr.context_switch;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PtRingSource>> FakeRingFactory::Open(const PtRingRequest& request) {
  std::string cgroup_dir;
  if (request.cgroup_fd >= 0) {
    // perf_event_open: PERF_FLAG_PID_CGROUP with cpu -1 is EINVAL; perf_cgroup_connect
    // wants the fd of a cgroup directory.
    const PerfOpenTarget on = PerfOpenTargetOf(request, request.tid);
    if (on.cpu < 0) return PerfOpenError(EINVAL, request.attr, on.pid, on.cpu);
    struct stat st {};
    if (fstat(on.pid, &st) != 0 || !S_ISDIR(st.st_mode)) return PerfOpenError(EBADF, request.attr, on.pid, on.cpu);
    char path[4096];
    const ssize_t n = readlink(absl::StrCat("/proc/self/fd/", on.pid).c_str(), path, sizeof(path));
    cgroup_dir.assign(path, n > 0 ? static_cast<size_t>(n) : 0);
  } else if (gone_tids.count(request.tid) != 0) {
    return PerfOpenError(ESRCH, request.attr, request.tid, request.cpu);
  }

  if (!request.filter.empty()) {
    // KernelPtRing: PERF_EVENT_IOC_SET_FILTER right after the open.
    // A cgroup's events are CPU-wide: no task context.
    if (int err = CheckKernelAddressFilter(request.filter, request.attr, num_address_ranges,
                                           request.cgroup_fd < 0);
        err != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--filter '", request.filter, "': PERF_EVENT_IOC_SET_FILTER failed: ",
          std::strerror(err)));
    }
  }
  // PERF_EVENT_IOC_SET_OUTPUT of the tracking event into the PT event
  // (perf_event_set_output): same CPU and, per task, the same task hold by construction
  // (both opened on request.tid and request.cpu), and the PT event is mapped first; the
  // clocks must match.
  if (request.attr.use_clockid != request.tracking_attr.use_clockid ||
      (request.attr.use_clockid && request.attr.clockid != request.tracking_attr.clockid)) {
    return absl::InvalidArgumentError("PERF_EVENT_IOC_SET_OUTPUT failed: Invalid argument");
  }
  // perf_mmap: no mmap of an inherited per-task event (every child would write into it).
  if (request.cpu < 0 && request.cgroup_fd < 0 && request.attr.inherit) {
    return PerfMmapError(EINVAL, "DATA ring", request.data_size, false);
  }
  const uint64_t bytes = FakePtKernel::kPage + request.data_size + request.aux_size;
  size_t ring = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ring = kernels_.size();
    // perf_event_alloc (exclusive_event_init) and perf_install_in_context's check come
    // before the mmap; a refused mmap closes the event, which gives its count back.
    if (absl::Status st = TakePtLocked(request, request.tid, ring); !st.ok()) return st;
    if (mlock_limit_bytes != 0 && mapped_bytes_ + bytes > mlock_limit_bytes) {
      // The DATA mmap is charged first; report the one that crossed the limit.
      const bool data_fits = mapped_bytes_ + FakePtKernel::kPage + request.data_size <=
                             mlock_limit_bytes;
      pt_events_.pop_back();
      return data_fits ? PerfMmapError(EPERM, "AUX area", request.aux_size, request.overwrite)
                       : PerfMmapError(EPERM, "DATA ring", request.data_size, false);
    }
    mapped_bytes_ += bytes;
  }
  FakeKernelOptions options;
  options.data_size = request.data_size;
  options.aux_size = request.aux_size;
  options.overwrite = request.overwrite;
  options.aux_watermark = request.attr.aux_watermark;
  options.cpu = request.cpu;
  options.tid = request.cpu < 0 ? request.tid : -1;
  options.pid = static_cast<uint32_t>(request.tid);
  // perf_event_alloc: PERF_EVENT_STATE_OFF when attr.disabled; enable_on_exec turns a
  // launch's events on at its exec, which follows the open (FakeKernelOptions::enabled).
  options.enabled = !request.attr.disabled || request.attr.enable_on_exec;
  options.sideband_on_pt = AsksForSideband(request.attr);
  options.tracking_event = request.tracking_attr.type == PERF_TYPE_SOFTWARE &&
                           request.tracking_attr.config == PERF_COUNT_SW_DUMMY &&
                           AsksForSideband(request.tracking_attr);
  auto kernel = std::make_unique<FakePtKernel>(options);
  // perf_mmap_close gives the pages back to the user's locked_vm.
  kernel->on_unmapped = [this, bytes, ring] {
    std::lock_guard<std::mutex> lock(mu_);
    mapped_bytes_ -= bytes;
    // Its events are closed: exclusive_event_destroy gives their count back.
    std::erase_if(pt_events_, [ring](const PtEvent& e) { return e.ring == ring; });
  };
  if (on_open) on_open(*kernel);
  std::unique_ptr<PtRingSource> source = kernel->MakeSource();
  std::lock_guard<std::mutex> lock(mu_);
  kernels_.push_back(std::move(kernel));
  requests_.push_back(request);
  threads_.push_back({request.tid});
  cgroup_dirs_.push_back(cgroup_dir);
  sources_.push_back(source.get());
  return source;
}

absl::Status FakeRingFactory::AddThread(PtRingSource& ring, int tid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(sources_.begin(), sources_.end(), &ring);
  if (it == sources_.end()) return absl::InternalError("AddThread on a ring of another factory");
  const size_t i = static_cast<size_t>(it - sources_.begin());
  if (gone_tids.count(tid) != 0) {
    return PerfOpenError(ESRCH, requests_[i].attr, tid, requests_[i].cpu);
  }
  // perf_event_set_output (6.3+ text): a per-thread ring (cpu -1) takes only its own
  // task's events ("If its not a per-cpu rb, it must be the same task"); a per-CPU one
  // only events of its CPU, which AddThread's are by construction.
  if (requests_[i].cpu < 0 && tid != requests_[i].tid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PERF_EVENT_IOC_SET_OUTPUT of thread ", tid, " into thread ", requests_[i].tid,
        "'s per-thread ring failed: Invalid argument"));
  }
  if (absl::Status st = TakePtLocked(requests_[i], tid, i); !st.ok()) return st;
  threads_[i].push_back(tid);
  // A running thread's events: its exec is long past, so only attr.disabled counts.
  kernels_[i]->AddEvent(tid, !requests_[i].attr.disabled);
  return absl::OkStatus();
}

absl::Status FakeRingFactory::Enable(PtRingSource& ring) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(sources_.begin(), sources_.end(), &ring);
  if (it == sources_.end()) return absl::InternalError("Enable on a ring of another factory");
  kernels_[static_cast<size_t>(it - sources_.begin())]->EnableAll();
  enables_++;
  return absl::OkStatus();
}

absl::Status FakeRingFactory::TakePtLocked(const PtRingRequest& request, int tid, size_t ring) {
  // A cgroup's events have no task: CPU-wide, as far as exclusivity goes.
  const bool per_task = request.cgroup_fd < 0;
  const int task = per_task ? tid : -1;
  int exclusive_cnt = other_pt_events;
  bool installable = !(per_task && other_traced_tids.count(tid) != 0);
  for (const PtEvent& e : pt_events_) {
    exclusive_cnt += e.tid >= 0 ? 1 : -1;
    // exclusive_event_match: same PMU and overlapping CPUs, in the same task context
    // (CPU-wide events of one CPU share that CPU's context).
    const bool same_context = e.tid == task && (task >= 0 || e.cpu == request.cpu);
    if (same_context && (e.cpu == request.cpu || e.cpu < 0 || request.cpu < 0)) {
      installable = false;
    }
  }
  const bool busy = per_task ? exclusive_cnt < 0 : exclusive_cnt > 0;
  if (busy || !installable) {
    const PerfOpenTarget on = PerfOpenTargetOf(request, tid);
    return PerfOpenError(EBUSY, request.attr, on.pid, on.cpu, on.flags);
  }
  pt_events_.push_back({task, request.cpu, ring});
  return absl::OkStatus();
}

uint64_t FakeRingFactory::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mapped_bytes_;
}

size_t FakeRingFactory::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kernels_.size();
}

FakePtKernel& FakeRingFactory::kernel(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  return *kernels_.at(i);
}

std::vector<PtRingRequest> FakeRingFactory::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::vector<int> FakeRingFactory::threads(size_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.at(i);
}

std::string FakeRingFactory::cgroup_dir(size_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return cgroup_dirs_.at(i);
}

int FakeRingFactory::enables() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enables_;
}

}  // namespace ptd::pt::testing
