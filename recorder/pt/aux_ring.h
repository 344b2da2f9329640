#pragma once
// Reader of a perf AUX area (kernel side: kernel/events/ring_buffer.c, perf_aux_output_*).
// Borrows the header page and the AUX mapping, so the same code reads a real mmap or the
// in-process fake kernel of the tests.
//
// Linear (full-trace) mode: the kernel writes at aux_head and never past aux_tail + size;
// the reader copies [aux_tail, aux_head) and publishes aux_tail with a release store.
// Overwrite (snapshot) mode: the intel_pt driver publishes the hardware's write offset
// inside the buffer as aux_head (pt_event_stop hands pt_update_head's offset to
// perf_aux_output_end), so the head alone cannot say how much was written since the
// previous snapshot: n bytes, or n plus whole laps (and every PERF_RECORD_AUX is sized to
// the whole buffer). The reader keeps a copy of the ring as it last read it; the bytes
// between the new head and the previous one are unchanged when no lap happened, and then
// only the n new bytes are taken. Otherwise the whole ring is taken and the chunk says
// that data was lost before it. Unchanged bytes prove no lap only when they hold a PSB+
// timestamp (or the trace has none): else the n bytes are taken marked as maybe after a
// gap (CopyNew). Before the first lap
// the unwritten part is still the zeroes the kernel handed out, which serves as the
// "previous copy" (perf's intel_pt_find_snapshot looks at the same zeroes to detect the
// first wrap; it leaves the overlap of later snapshots to the decoder, we cut it here).

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ptd::pt {

// Where the bytes a read produced sit in the AUX stream.
struct AuxCopy {
  uint64_t aux_offset = 0;  // stream position of the first byte copied
  uint64_t size = 0;
  bool lost_before = false; // bytes between the previous copy and this one were overwritten
};

class AuxRing {
 public:
  AuxRing(perf_event_mmap_page* header, const uint8_t* aux, size_t aux_size, bool overwrite);

  // Linear mode: appends [aux_tail, aux_head) to `out` and releases it to the kernel.
  AuxCopy Drain(std::string* out);

  // Overwrite mode, with the PT event disabled: appends the bytes written since the
  // previous snapshot (at most the whole ring), oldest first.
  AuxCopy CopyNew(std::string* out);

  // Acquire load of aux_head.
  uint64_t head() const;
  bool overwrite() const { return overwrite_; }
  size_t size() const { return size_; }

 private:
  // Appends `size` bytes starting at ring position `pos` (mod size_).
  void CopyOut(uint64_t pos, uint64_t size, std::string* out) const;
  // Whether ring positions [pos, pos + size) still hold what the previous snapshot saw.
  bool Unchanged(uint64_t pos, uint64_t size) const;
  // Records ring positions [pos, pos + size) as seen.
  void Remember(uint64_t pos, uint64_t size);
  // Ring positions [pos, pos + size) as one string.
  std::string Bytes(uint64_t pos, uint64_t size) const;
  // The newest TSC of the PSB+ groups in ring positions [pos, pos + size), if any.
  std::optional<uint64_t> NewestTsc(uint64_t pos, uint64_t size) const;

  perf_event_mmap_page* header_;
  const uint8_t* aux_;
  size_t size_;
  bool overwrite_;
  uint64_t last_offset_ = 0;   // in-buffer head at the previous snapshot
  uint64_t stream_pos_ = 0;    // bytes handed out so far
  bool copied_before_ = false;
  std::string seen_;           // the ring as last read; empty: all zero (never written)
  bool filled_ = false;        // every position was written at least once
  std::optional<uint64_t> last_tsc_;  // the newest PSB+ TSC among the bytes taken
};

}  // namespace ptd::pt
