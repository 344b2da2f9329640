#pragma once
// The seam between the ring-reading code and whoever provides the ring: on hardware, an
// intel_pt perf event's mmap (PerfPtRing); in tests, the in-process fake kernel. Only the
// fd and the memory differ; everything that reads the memory is shared.

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>

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
  virtual AuxHeadKind head_kind() const = 0;

  // Stops the producer so a snapshot reads a stable ring, and makes it publish aux_head;
  // on return nothing writes into the ring until ResumeOutput().
  virtual absl::Status StopOutput() = 0;
  virtual absl::Status ResumeOutput() = 0;

  // Readable when the kernel woke us (aux_watermark / wakeup_watermark); -1 when the
  // provider has no fd (fake): the reader then polls on a timer.
  virtual int poll_fd() const = 0;
  virtual int cpu() const = 0;  // -1 for a per-thread ring
  virtual int tid() const = 0;  // -1 for a per-CPU ring
};

}  // namespace ptd::pt
