#pragma once
// Reader of a perf DATA ring (the kernel's side of the protocol is in
// kernel/events/ring_buffer.c): the kernel advances data_head, the reader copies the
// records in [data_tail, data_head) and then publishes data_tail so the kernel can reuse
// the space. Does not own the memory: the same code reads a real mmap or a fake buffer.

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace ptd {

// Running totals over every Drain() of one ring.
struct DataRingStats {
  uint64_t bytes = 0;           // record bytes copied out
  uint64_t records = 0;         // records copied out (all types)
  uint64_t lost_records = 0;    // sum of PERF_RECORD_LOST.lost: records the kernel dropped
  uint64_t lost_events = 0;     // number of PERF_RECORD_LOST records seen
  uint64_t lost_samples = 0;    // sum of PERF_RECORD_LOST_SAMPLES.lost
  uint64_t wrapped_records = 0; // records that straddled the end of the buffer
  uint64_t drains = 0;          // Drain() calls that found data
};

class DataRing {
 public:
  // `data` is the DATA area (data_size bytes, a power of two) following `header`.
  DataRing(perf_event_mmap_page* header, uint8_t* data, size_t data_size);

  // Appends every complete record in [data_tail, data_head) to `out_append` exactly as
  // the kernel laid it out (a record that wraps the buffer end is joined back together),
  // then releases the space. A corrupt ring (record size 0, not a multiple of 8, or past
  // data_head) is an error naming the ring offset; the records before it are kept and the
  // rest of the unread data is released so the kernel can go on.
  absl::Status Drain(std::string* out_append, DataRingStats* stats);

  // True when data_head != data_tail (acquire load of data_head).
  bool HasData() const;

  size_t data_size() const { return data_size_; }

 private:
  // Copies `size` bytes starting at ring position `pos` (mod data_size_) to `dst`.
  void CopyOut(uint64_t pos, size_t size, uint8_t* dst) const;

  perf_event_mmap_page* header_;
  uint8_t* data_;
  size_t data_size_;
  uint64_t mask_;
};

}  // namespace ptd
