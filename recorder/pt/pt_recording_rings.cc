// PtRecording's rings: opened per thread, per CPU or per cgroup, followed onto new tasks,
// and retired when their thread exits.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "recorder/pt/perf_clock.h"
#include "recorder/pt/pt_recording.h"
#include "recorder/sideband/sideband_recorder.h"

namespace ptd::pt {
namespace {

std::string StreamName(int cpu, int tid) {
  return cpu >= 0 ? absl::StrCat("cpu", cpu) : absl::StrCat("tid", tid);
}

}  // namespace

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

}  // namespace ptd::pt
