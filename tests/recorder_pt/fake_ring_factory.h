#pragma once
// A PtRingFactory that hands out fake-kernel rings instead of perf_event_open + mmap:
// the recording flow above it (PtRecording, RecordHardware, ptd::Recorder) runs unchanged.
// It refuses what the kernel would, with the kernel's errno and the recorder's messages
// for it (PerfOpenError, PerfMmapError): ESRCH for threads that are gone, EBUSY when PT
// is taken, EPERM when the rings exceed the locked-memory allowance, address filters
// the kernel's grammar refuses (CheckKernelAddressFilter), and cgroup events that are not
// per CPU (EINVAL) or whose fd is not a directory (EBADF), as perf_event_open does, an
// mmap of an inherited per-task event (EINVAL, perf_mmap), and a tracking event on
// another clock than the PT event it is redirected into (EINVAL, perf_event_set_output).

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
  // perf_event_open of the PT event fails with this errno (e.g. EBUSY), 0: no failure.
  int open_errno = 0;
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
  int enables_ = 0;
};

}  // namespace ptd::pt::testing
