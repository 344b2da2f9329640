#pragma once
// The time of each packet of a buffer, for the time axis. A timing packet (TSC, TMA, MTC,
// CYC, CBR) times the packet after it (SDM: a CYC the TNT or TIP it precedes). libipt's
// query decoder, and PacketQuery as it, read ahead over timing packets to the next packet
// that makes a branch or an event, so the time they report after a step is already that
// next packet's: the instructions between the step and that packet (a wrapper's code
// before its syscall's TIP.PGD) would get a time they had not reached yet. This index,
// one scan of the buffer with libipt's arithmetic (PacketTime, the calibration carried
// from the buffer's first packet), gives each packet the time of the timing packets
// before it; a lookup at a decoder's offset gives the time of the last packet that
// decoder consumed (the rule of CycleIndex). Every decoder (the fast one, libipt's block
// and instruction decoders) and every piece of a parallel decode looks up the same index
// at the same offsets, so their times agree. Bytes the packet decoder cannot parse are
// skipped to the next PSB (as the flow decoders do).

#include <intel-pt.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace ptd::decoder {

class TimeIndex {
 public:
  // From the packet at `offset` on (until the next entry), the time is `tsc`.
  struct Entry {
    uint64_t offset = 0;
    uint64_t tsc = 0;
  };

  TimeIndex() = default;
  // Scans config.begin..config.end; takes mtc_freq, nom_freq, CPUID 0x15 and the errata
  // from `config`. The bytes must be padded as for the flow decoders.
  static TimeIndex Build(const pt_config& config);

  // The time of the last packet before `offset` (0: no time yet).
  uint64_t At(uint64_t offset) const;
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;  // offsets strictly increasing
};

// A buffer's TimeIndex, built by the first decoder that asks (the pieces of a buffer
// share one).
class SharedTimeIndex {
 public:
  const TimeIndex& Get(const pt_config& config) {
    std::call_once(once_, [&] { index_ = TimeIndex::Build(config); });
    return index_;
  }

 private:
  std::once_flag once_;
  TimeIndex index_;
};

}  // namespace ptd::decoder
