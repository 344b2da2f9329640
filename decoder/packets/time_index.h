#pragma once
// The time of each packet of a buffer, for the time axis, and the CYC calibration at each
// of its PSBs. A timing packet (TSC, TMA, MTC, CYC, CBR) times the packet after it (SDM: a
// CYC the TNT or TIP it precedes). libipt's query decoder, and PacketQuery as it, read
// ahead over timing packets to the next packet that makes a branch or an event, so the
// time they report after a step is already that next packet's: the instructions between
// the step and that packet (a wrapper's code before its syscall's TIP.PGD) would get a
// time they had not reached yet. This index, one fold over the buffer's packets with
// libipt's arithmetic (PacketTime, the calibration carried from the buffer's first packet),
// gives each packet the time of the timing packets before it; a lookup at a decoder's
// offset gives the time of the last packet that decoder consumed (the rule of CycleIndex).
// Every decoder (the fast one, libipt's block and instruction decoders) and every piece of
// a parallel decode looks up the same index at the same offsets, so their times agree.
//
// The same fold records the calibration one query reading the buffer from its first PSB
// holds at each PSB (OVFs reset it, as they reset the query): a query started at a PSB the
// one query passes in flight (a piece of a parallel decode) takes it, so its CYC times are
// the one query's (PacketQuery::SyncContinue).
//
// The packets come from PacketQuery's scan when it kept them (its packet index: no second
// decode of the bytes), else from a walk with libipt's packet decoder (other decoder
// kinds, buffers over PacketQuery::kMaxIndexedBytes); bytes the packet decoder cannot
// parse are skipped to the next PSB (as the flow decoders do).

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "decoder/packets/packet_index.h"
#include "decoder/packets/packet_time.h"

namespace ptd::decoder {

class TimeIndex {
 public:
  // From the packet at `offset` on (until the next entry), the time is `tsc`.
  struct Entry {
    uint64_t offset = 0;
    uint64_t tsc = 0;
  };

  TimeIndex() = default;
  // Folds config.begin..config.end; takes mtc_freq, nom_freq, CPUID 0x15 and the errata
  // from `config`. The bytes must be padded as for the flow decoders. `packets`: the
  // index PacketQuery's scan kept of the same bytes, or null.
  static TimeIndex Build(const pt_config& config, const PacketIndex* packets = nullptr);

  // The time of the last packet before `offset` (0: no time yet); a binary search (a
  // decoder reads through TimeCursor).
  uint64_t At(uint64_t offset) const;
  // At the PSB at `psb`, before its PSB+ is read; null if the buffer has no PSB there.
  const PacketTime::Calibration* CalibrationAt(uint64_t psb) const;
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  class Fold;
  std::vector<Entry> entries_;  // offsets strictly increasing
  std::vector<std::pair<uint64_t, PacketTime::Calibration>> at_psbs_;  // by offset
};

// TimeIndex::At for one decoder, whose offsets only grow between its seeks: a cursor that
// steps forward, and searches only where the decoder went back (a resync) or far ahead.
class TimeCursor {
 public:
  TimeCursor() = default;
  explicit TimeCursor(const TimeIndex* index)
      : entries_(index->entries().data()), size_(index->entries().size()) {}
  uint64_t At(uint64_t offset) {
    if ((next_ < size_ && entries_[next_].offset < offset) || (next_ > 0 && entries_[next_ - 1].offset >= offset))
        [[unlikely]] {
      Move(offset);
    }
    return next_ == 0 ? 0 : entries_[next_ - 1].tsc;
  }

 private:
  void Move(uint64_t offset);
  const TimeIndex::Entry* entries_ = nullptr;
  size_t size_ = 0;
  size_t next_ = 0;  // the first entry at or after the last offset looked up
};

// A buffer's TimeIndex, built by the first decoder or query that asks (the pieces of a
// buffer share one).
class SharedTimeIndex {
 public:
  // `packets`: PacketQuery's index of the buffer (null: none kept).
  explicit SharedTimeIndex(std::shared_ptr<const PacketIndex> packets = nullptr) : packets_(std::move(packets)) {}
  const TimeIndex& Get(const pt_config& config) {
    std::call_once(once_, [&] { index_ = TimeIndex::Build(config, packets_.get()); });
    return index_;
  }

 private:
  std::shared_ptr<const PacketIndex> packets_;
  std::once_flag once_;
  TimeIndex index_;
};

}  // namespace ptd::decoder
