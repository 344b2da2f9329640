#pragma once
// Cycle counts for FlowEvents. libipt 2.0.5's flow decoders do not expose the cycles
// CYC packets count, so each buffer is scanned once with libipt's packet decoder and
// the flow decoder's position (pt_blk_get_offset / pt_insn_get_offset) is looked up.
//
// "Cycles at an event": the sum of the CYC payloads before the last packet the flow
// decoder had consumed when it reported the event (the TNT/TIP/FUP/... that produced it).
// A CYC times the packet after it, so the CYCs the query decoder reads ahead past that
// packet (up to the next TNT/TIP/event packet) belong to the next packet and are not
// counted yet. Lookups at offset X therefore count the CYCs whose timed packet (the first
// non-timing packet after them) lies before X. Tracing that (re)starts with a block is
// timed at the offset before that block: how far libipt reads ahead for it depends on
// its block cache, i.e. on what that decoder decoded before. Bytes the packet decoder cannot parse are
// skipped to the next PSB (as the flow decoders do).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/mapped_array.h"

namespace ptd::decoder {

class CycleIndex {
 public:
  // One group of CYCs: `cycles` (from the buffer's start, this group included) become
  // visible to lookups past `offset`, the packet the group times.
  struct Entry {
    uint64_t offset = 0;
    uint64_t cycles = 0;
  };

  CycleIndex() = default;
  // Scans `padded[0, size)`; `padded` must hold size + kPtPadding bytes, the tail zero.
  static CycleIndex Build(const uint8_t* padded, size_t size);
  // The same index, scanned by up to `threads` threads in stretches cut at `psbs` (the
  // buffer's PSB offsets) when the buffer is large (parallel decoding: the pieces of a
  // buffer wait for its index).
  static CycleIndex Build(const uint8_t* padded, size_t size, const std::vector<uint64_t>& psbs, int threads);
  static constexpr size_t kMinParallelBytes = size_t{1} << 20;

  // The CYC groups of one stretch of packets, fed in order by whatever decodes them (the
  // index's own pass here, PacketQuery's scan for the fast decoder: one pass over the
  // packets serves both). Entries are buffer offsets; cycles count from the stretch's
  // start.
  struct Stretch {
    MappedArray<Entry> entries;
    uint64_t total = 0;
    size_t cyc_packets = 0;
    bool open = false;     // CYCs at the end that no packet after them claimed
    bool aligned = false;  // (own pass) the last packet ended exactly where the next stretch starts
    void OnCyc(uint64_t cycles) {
      total += cycles;
      ++cyc_packets;
      open = true;
    }
    // A packet the query decoder does not read ahead over (IsTimingPacket), at `offset`.
    void OnTimed(uint64_t offset) {
      if (!open) return;
      entries.push_back({offset, total});
      open = false;
    }
  };
  // Whether libipt's query decoder reads ahead over packets of `type` (they make no
  // branch and no event: a CYC before them times what follows them).
  static bool IsTimingPacket(int type);
  // The index of stretches that follow one another, stretch k starting at `starts[k]`
  // (the first at the buffer's first PSB), each where the one before ended.
  static CycleIndex Join(std::vector<Stretch>* stretches, const std::vector<uint64_t>& starts);

  // Cycles counted at decoder offset `offset` (see above); relative to the buffer start.
  uint64_t At(uint64_t offset) const;
  // Every CYC payload of the buffer, trailing ones (no packet after them) included.
  uint64_t total() const { return total_; }
  size_t cyc_packets() const { return cyc_packets_; }
  const MappedArray<Entry>& entries() const { return entries_; }

 private:
  static Stretch Scan(const uint8_t* padded, uint64_t from, uint64_t to);

  MappedArray<Entry> entries_;  // offsets strictly increasing (one per CYC group: grows without copies)
  uint64_t total_ = 0;
  size_t cyc_packets_ = 0;
};

// Lookups at (mostly) increasing offsets: a moving cursor, binary search when the
// decoder jumps (a piece's start, a resync back to an earlier PSB). Never decreases:
// the value is clamped to the largest handed out since Reset.
class CycleCursor {
 public:
  // Looks up `index` (a buffer that starts `base` cycles into the stream) from now on.
  void Start(const CycleIndex* index, uint64_t base) {
    index_ = index;
    entries_ = index->entries().data();
    size_ = index->entries().size();
    base_ = base;
    next_ = 0;
    Raise(base);
  }
  // Back to nothing looked up (a new piece).
  void Clear() { *this = CycleCursor(); }
  bool active() const { return index_ != nullptr; }
  uint64_t last() const { return last_; }
  void Raise(uint64_t floor) { last_ = floor > last_ ? floor : last_; }
  // Inline: most lookups (several per CYC group) do not move the cursor.
  uint64_t At(uint64_t offset) {
    if ((next_ < size_ && entries_[next_].offset < offset) || (next_ > 0 && entries_[next_ - 1].offset >= offset)) {
      Move(offset);
    }
    return last_;
  }

 private:
  void Move(uint64_t offset);

  const CycleIndex* index_ = nullptr;
  const CycleIndex::Entry* entries_ = nullptr;
  size_t size_ = 0;
  uint64_t base_ = 0;
  size_t next_ = 0;  // first entry not yet visible
  uint64_t last_ = 0;
};

// True when the `limit` bytes of `bytes` (padded as for Build) from its first PSB hold a packet of
// libipt's pt_packet_type `type`.
// With `max_psb_groups`, the look ends after that many PSB+ groups (their PSBENDs).
bool StreamHasPacket(absl::Span<const uint8_t> bytes, int type, size_t limit, int max_psb_groups = 0);
// StreamHasPacket for CYC.
// CYC comes with most packets when enabled (at the configured threshold): 64 KiB of
// packets (a dozen PSB intervals) hold one.
bool StreamHasCyc(absl::Span<const uint8_t> bytes, size_t limit = 64 << 10);

}  // namespace ptd::decoder
