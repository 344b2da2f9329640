#pragma once
// The output time axis of one stream. With timing packets: TSC → ns via meta.json's
// conversion, and between updates time advances with the instructions executed at the
// rate of the interval before (not spread evenly), never backwards. Without: the
// instruction count. Parallel decoding replays a piece's updates through this same
// object once the state at the piece's start is known, so both paths compute the same
// numbers. The cycles axis is fed cycle counts (CYC) instead of instructions.

#include <algorithm>
#include <cstdint>
#include <optional>

#include "common/trace_meta.h"

namespace ptd::decoder {

enum class TimeAxis { kTime, kInstructions, kCycles };

class TimeInterpolator {
 public:
  TimeInterpolator(TimeAxis axis, const TimeConversion& conversion) : axis_(axis), conversion_(conversion) {}

  // A timing packet said `tsc` when `instructions` had executed.
  void Update(uint64_t tsc, uint64_t instructions) {
    if (axis_ != TimeAxis::kTime || tsc == 0 || tsc == last_tsc_) return;
    last_tsc_ = tsc;
    uint64_t ns = conversion_.TscToNs(tsc);
    if (base_ && ns > base_->ns && instructions > base_->instructions) {
      ns_per_insn_ = static_cast<double>(ns - base_->ns) / static_cast<double>(instructions - base_->instructions);
    }
    if (!base_ || ns > base_->ns) base_ = TimePoint{ns, instructions};
  }

  // The time when `instructions` had executed (non-decreasing across calls). On the
  // cycles axis: `instructions` is the cycle count.
  uint64_t Now(uint64_t instructions) {
    if (axis_ != TimeAxis::kTime) {
      last_ = std::max(last_, instructions);
    } else if (base_) {
      double t = static_cast<double>(base_->ns) + ns_per_insn_ * static_cast<double>(instructions - base_->instructions);
      last_ = std::max(last_, static_cast<uint64_t>(t));
    }
    return last_;
  }

  uint64_t last() const { return last_; }
  TimeAxis axis() const { return axis_; }

 private:
  struct TimePoint {
    uint64_t ns = 0;
    uint64_t instructions = 0;
  };

  TimeAxis axis_;
  TimeConversion conversion_;
  uint64_t last_tsc_ = 0;
  // The latest update that moved time forward (none before the first timing packet):
  // time runs on from it at ns_per_insn_.
  std::optional<TimePoint> base_;
  double ns_per_insn_ = 0;
  uint64_t last_ = 0;
};

}  // namespace ptd::decoder
