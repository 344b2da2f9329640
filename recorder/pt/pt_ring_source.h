#pragma once
// The seam between the ring-reading code and whoever provides the ring: on hardware, an
// intel_pt perf event's mmap (KernelPtRing); in tests, the in-process fake kernel. Only the
// fd and the memory differ; everything that reads the memory is shared.

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "recorder/pt/aux_ring.h"

namespace ptd::pt {

class PtRingSource {
 public:
  virtual ~PtRingSource() = default;

  virtual perf_event_mmap_page* header() const = 0;
  virtual uint8_t* data() const = 0;  // DATA ring, data_size() bytes (power of two)
  virtual size_t data_size() const = 0;
  virtual const uint8_t* aux() const = 0;
  virtual size_t aux_size() const = 0;
  virtual bool overwrite() const = 0;  // snapshot (PROT_READ) AUX mapping

  // PERF_EVENT_IOC_DISABLE / ENABLE on the ring's PT events only. Disabling stops the
  // hardware and makes the driver publish aux_head (pt_event_stop); no trace is written
  // until EnablePt(). The tracking event that carries the sideband stays enabled, so no
  // MMAP/COMM/FORK/SWITCH is missed meanwhile. The DATA ring is never paused: a paused
  // ring would turn the PERF_RECORD_AUX the disable writes into a PERF_RECORD_LOST.
  virtual absl::Status DisablePt() = 0;
  virtual absl::Status EnablePt() = 0;

  // The fds of the ring's PT events (one per thread whose events write into the ring).
  // The kernel wakes every event of a ring (ring_buffer_wakeup), so each is readable
  // when the AUX head passed aux_watermark; each polls POLLHUP for good once its own
  // task has exited and none of its inherited children remain (is_event_hup), while the
  // ring's other events go on. Empty: drained on a timer.
  virtual std::vector<int> poll_fds() const = 0;
  virtual int cpu() const = 0;  // -1 for a per-thread ring
  virtual int tid() const = 0;  // -1 for a per-CPU ring
};

}  // namespace ptd::pt
