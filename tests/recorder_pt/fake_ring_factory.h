#pragma once
// A PtRingFactory that hands out fake-kernel rings instead of perf_event_open + mmap:
// the recording flow above it (PtRecording, RecordHardware, ptd::Recorder) runs unchanged.
// It refuses what the kernel would, with the kernel's errno and the recorder's messages
// for it (PerfOpenError, PerfMmapError): ESRCH for threads that are gone, EBUSY when PT
// is taken (exclusive_event_init: per-task and CPU-wide PT events never coexist;
// exclusive_event_installable: one PT event per task and CPU), EPERM when the rings exceed the locked-memory allowance, address filters
// the kernel's grammar refuses (CheckKernelAddressFilter), and cgroup events that are not
// per CPU (EINVAL) or whose fd is not a directory (EBADF), as perf_event_open does, an
// mmap of an inherited per-task event (EINVAL, perf_mmap), and a tracking event on
// another clock than the PT event it is redirected into or another task's events
// redirected into a per-thread ring (EINVAL, perf_event_set_output).

#include <cerrno>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "recorder/pt/pt_ring_factory.h"
#include "tests/recorder_pt/fake_pt_kernel.h"

namespace ptd::pt::testing {

class FakeRingFactory : public PtRingFactory {
 public:
  // Called with each new fake kernel before its ring is handed out (e.g. to pre-fill it).
  std::function<void(FakePtKernel&)> on_open;
  // perf_event_open fails with ESRCH for these threads (they exited).
  std::set<int> gone_tids;
  // PT events of another tool, as intel_pt's pmu->exclusive_cnt counts them
  // (exclusive_event_init): > 0 per-task events (perf record -e intel_pt -p), < 0
  // CPU-wide ones (perf record -a). The recorder's own events count too.
  int other_pt_events = 0;
  // Threads another tool traces with a per-task PT event on every CPU (cpu -1): a second
  // PT event on them is EBUSY (exclusive_event_installable).
  std::set<int> other_traced_tids;
  // perf_mmap(): EPERM once the mapped pages (header + DATA + AUX of every ring open
  // now) exceed this many bytes: one budget per user, charged at each mmap and given
  // back at each munmap; 0: no limit (CAP_IPC_LOCK).
  uint64_t mlock_limit_bytes = 0;
  // caps/num_address_ranges for the kernel's check of request.filter.
  uint64_t num_address_ranges = 2;

  absl::StatusOr<std::unique_ptr<PtRingSource>> Open(const PtRingRequest& request) override;
  absl::Status AddThread(PtRingSource& ring, int tid) override;
  absl::Status Enable(PtRingSource& ring) override;

  size_t size() const;
  FakePtKernel& kernel(size_t i);
  std::vector<PtRingRequest> requests() const;
  // Threads whose events were added to ring i (the owner first).
  std::vector<int> threads(size_t i) const;
  // Ring i's cgroup request: the directory its cgroup_fd was open on when the events
  // were opened ("" for a thread request).
  std::string cgroup_dir(size_t i) const;
  int enables() const;
  // Bytes the open rings have locked (the user's locked_vm); a ring's bytes are given
  // back when the recorder drops it (perf_mmap_close).
  uint64_t mapped_bytes() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FakePtKernel>> kernels_;
  std::vector<PtRingRequest> requests_;
  std::vector<std::vector<int>> threads_;
  std::vector<std::string> cgroup_dirs_;
  std::vector<const PtRingSource*> sources_;
  uint64_t mapped_bytes_ = 0;
  // exclusive_event_init / exclusive_event_installable over the recorder's PT events.
  // Takes one PT event of task `tid` (-1: CPU-wide) on `cpu` for ring `ring`, or EBUSY.
  absl::Status TakePtLocked(const PtRingRequest& request, int tid, size_t ring);
  struct PtEvent {
    int tid;
    int cpu;
    size_t ring;
  };
  std::vector<PtEvent> pt_events_;  // of the rings not yet dropped
  int enables_ = 0;
};

}  // namespace ptd::pt::testing
