#pragma once
// Who opens the PT events and provides their rings. The kernel factory does
// perf_event_open + mmap; tests substitute one that hands out fake-kernel rings. The
// recording logic above it (PtRecording) is the same either way.

#include <linux/perf_event.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recorder/pt/pt_ring_source.h"

namespace ptd::pt {

// One ring: per thread, an intel_pt event and a tracking event (a PERF_COUNT_SW_DUMMY
// with the sideband bits, as perf's dummy:u), all writing into the ring of the first
// (PERF_EVENT_IOC_SET_OUTPUT). Snapshots disable only the PT events; the tracking event
// keeps recording MMAP/COMM/FORK/SWITCH, which the kernel does not write for a disabled
// event and does not count as lost either.
struct PtRingRequest {
  perf_event_attr attr{};           // the intel_pt event: sample_id fields, no sideband
  perf_event_attr tracking_attr{};  // the dummy event carrying the sideband
  int cpu = -1;             // -1: per-thread ring
  int tid = -1;             // the thread whose events own the ring (AddThread adds more)
  // >= 0 (with cpu >= 0, tid -1): the events count every task of the cgroup whose
  // directory this fd is open on, on `cpu` (perf_event_open's PERF_FLAG_PID_CGROUP, as
  // perf record -a -G). Only valid during Open().
  int cgroup_fd = -1;
  size_t data_size = 0;     // DATA ring bytes (2^n pages)
  size_t aux_size = 0;      // AUX bytes (2^n pages)
  bool overwrite = false;   // snapshot mode: PROT_READ AUX mapping
  std::string filter;       // PERF_EVENT_IOC_SET_FILTER, empty for none
};

// The pid, cpu and flags perf_event_open takes for `request`'s events of thread `tid`:
// (tid, cpu, 0), or for a cgroup request (cgroup_fd, cpu, PERF_FLAG_PID_CGROUP). The
// kernel refuses PERF_FLAG_PID_CGROUP with cpu -1 (EINVAL).
struct PerfOpenTarget {
  int pid = -1;
  int cpu = -1;
  unsigned long flags = 0;
};
PerfOpenTarget PerfOpenTargetOf(const PtRingRequest& request, int tid);

class PtRingFactory {
 public:
  virtual ~PtRingFactory() = default;
  // NotFound when the thread is gone (ESRCH); the error messages of perf_event_open and
  // mmap otherwise (PerfOpenError, PerfMmapError).
  virtual absl::StatusOr<std::unique_ptr<PtRingSource>> Open(const PtRingRequest& request) = 0;
  // Adds a thread's events to an open per-CPU ring (per-thread mode opens a new ring
  // instead). NotFound when the thread is gone.
  virtual absl::Status AddThread(PtRingSource& ring, int tid) = 0;
  // Enables every event of `ring`, tracking included (attach; a launch relies on
  // enable_on_exec).
  virtual absl::Status Enable(PtRingSource& ring) = 0;
};

// perf_event_open + mmap.
std::unique_ptr<PtRingFactory> MakeKernelPtRingFactory();

}  // namespace ptd::pt
