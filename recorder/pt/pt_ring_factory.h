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

struct PtRingRequest {
  perf_event_attr attr{};   // the complete intel_pt attr, sideband fields included
  int cpu = -1;             // -1: per-thread ring
  std::vector<int> tids;    // one event per thread; the first owns the ring, the others
                            // are redirected into it with PERF_EVENT_IOC_SET_OUTPUT
  size_t data_size = 0;     // DATA ring bytes (2^n pages)
  size_t aux_size = 0;      // AUX bytes (2^n pages)
  bool overwrite = false;   // snapshot mode: PROT_READ AUX mapping
  std::string filter;       // PERF_EVENT_IOC_SET_FILTER, empty for none
};

class PtRingFactory {
 public:
  virtual ~PtRingFactory() = default;
  virtual absl::StatusOr<std::unique_ptr<PtRingSource>> Open(const PtRingRequest& request) = 0;
  // Adds a thread's event to an open ring (per-thread mode opens a new ring instead).
  virtual absl::Status AddThread(PtRingSource& ring, int tid) = 0;
  // Enables every event of `ring` (attach; a launch relies on enable_on_exec).
  virtual absl::Status Enable(PtRingSource& ring) = 0;
};

// perf_event_open + mmap.
std::unique_ptr<PtRingFactory> MakeKernelPtRingFactory();

}  // namespace ptd::pt
