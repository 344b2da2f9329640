#pragma once
// Reader of a perf AUX area (kernel side: kernel/events/ring_buffer.c, perf_aux_output_*).
// Borrows the header page and the AUX mapping, so the same code reads a real mmap or the
// in-process fake kernel of the tests.
//
// Linear (full-trace) mode: the kernel writes at aux_head and never past aux_tail + size;
// the reader copies [aux_tail, aux_head) and publishes aux_tail with a release store.
// Overwrite (snapshot) mode: the kernel overwrites the oldest bytes; the newest byte ends
// at aux_head % size. Two head conventions exist: generic drivers publish a monotonic
// aux_head, while the intel_pt driver in snapshot mode publishes the hardware's offset
// inside the buffer (pt_update_head: data_size = base), so whether it wrapped cannot be
// told from the head. We never guess by scanning for zeros (which magic-trace's old direct
// backend did): for an offset head we copy the whole ring, oldest first. Bytes never
// written are zero, and 0x00 is the PT PAD packet, so the decoder skips them.

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ptd::pt {

enum class AuxHeadKind { kMonotonic, kBufferOffset };

// Where the bytes a read produced sit in the AUX stream.
struct AuxCopy {
  uint64_t aux_offset = 0;  // stream position of the first byte copied
  uint64_t size = 0;
  bool lost_before = false; // bytes between the previous copy and this one were overwritten
};

class AuxRing {
 public:
  AuxRing(perf_event_mmap_page* header, const uint8_t* aux, size_t aux_size, bool overwrite,
          AuxHeadKind head_kind = AuxHeadKind::kMonotonic);

  // Linear mode: appends [aux_tail, aux_head) to `out` and releases it to the kernel.
  AuxCopy Drain(std::string* out);

  // Overwrite mode, with the producer stopped: appends the bytes written since the
  // previous snapshot (at most the whole ring), oldest first.
  AuxCopy CopyNewest(std::string* out);

  // Acquire load of aux_head.
  uint64_t head() const;
  bool overwrite() const { return overwrite_; }
  size_t size() const { return size_; }

 private:
  // Appends `size` bytes starting at ring position `pos` (mod size_).
  void CopyOut(uint64_t pos, uint64_t size, std::string* out) const;

  perf_event_mmap_page* header_;
  const uint8_t* aux_;
  size_t size_;
  bool overwrite_;
  AuxHeadKind head_kind_;
  uint64_t last_head_ = 0;     // head at the previous snapshot (monotonic heads)
  uint64_t stream_pos_ = 0;    // bytes handed out so far (offset heads: our own count)
  bool copied_before_ = false;
};

}  // namespace ptd::pt
