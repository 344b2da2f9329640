#include "decoder/packets/psb_window.h"

#include <intel-pt.h>

#include <algorithm>
#include <vector>

#include "common/pt_psb.h"

namespace ptd::decoder {
namespace {

constexpr uint64_t kSearchStep = 64 * 1024;

}  // namespace

std::optional<uint64_t> FirstPsbAtOrAfter(absl::Span<const uint8_t> bytes, uint64_t from) {
  for (uint64_t start = from; start < bytes.size(); start += kSearchStep) {
    // Overlap by a PSB's length so a PSB across two steps is found.
    const uint64_t end = std::min<uint64_t>(bytes.size(), start + kSearchStep + kPsbSize);
    std::vector<uint64_t> found = FindPsbOffsets(bytes.subspan(start, end - start));
    if (!found.empty()) return start + found.front();
  }
  return std::nullopt;
}

std::optional<uint64_t> LastPsbAtOrBefore(absl::Span<const uint8_t> bytes, uint64_t at) {
  uint64_t end = std::min<uint64_t>(bytes.size(), at + kPsbSize);
  while (end > 0) {
    const uint64_t start = end > kSearchStep ? end - kSearchStep : 0;
    std::vector<uint64_t> found = FindPsbOffsets(bytes.subspan(start, std::min(bytes.size(), end + kPsbSize) - start));
    for (auto it = found.rbegin(); it != found.rend(); ++it) {
      if (start + *it <= at) return start + *it;
    }
    end = start;
  }
  return std::nullopt;
}

std::optional<PsbTime> FirstTimedPsbAtOrAfter(absl::Span<const uint8_t> bytes, uint64_t from,
                                              const TimeConversion& conversion) {
  for (std::optional<uint64_t> psb = FirstPsbAtOrAfter(bytes, from); psb;
       psb = FirstPsbAtOrAfter(bytes, *psb + 1)) {
    if (std::optional<uint64_t> tsc = PsbPlusTscAt(bytes, *psb)) return PsbTime{*psb, conversion.TscToNs(*tsc)};
  }
  return std::nullopt;
}

ByteRange PsbRangeForTimes(absl::Span<const uint8_t> bytes, uint64_t t0, uint64_t t1,
                           const TimeConversion& conversion) {
  ByteRange range{0, bytes.size()};
  std::optional<PsbTime> first = FirstTimedPsbAtOrAfter(bytes, 0, conversion);
  if (!first) return range;  // no timed PSB: all of it
  if (first->time >= t1) return ByteRange{0, 0};
  // The last byte offset whose next timed PSB is at or before t0: that PSB is the last
  // one at or before t0. The time of the next PSB only grows with the offset.
  if (first->time <= t0) {
    uint64_t lo = first->offset, hi = bytes.size();  // next(lo) <= t0; hi: unknown/after
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      std::optional<PsbTime> next = FirstTimedPsbAtOrAfter(bytes, mid, conversion);
      if (next && next->time <= t0) {
        lo = next->offset;
      } else {
        hi = mid;
      }
    }
    range.begin = lo;
  }
  // The first PSB at or after t1: the smallest offset whose next PSB is at or after t1.
  uint64_t lo = range.begin, hi = bytes.size();  // next(lo) < t1; next(hi): none
  std::optional<uint64_t> end;
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    std::optional<PsbTime> next = FirstTimedPsbAtOrAfter(bytes, mid, conversion);
    if (next && next->time < t1) {
      lo = next->offset;
    } else {
      hi = mid;
      if (next) end = next->offset;
    }
  }
  if (end) range.end = *end;
  return range;
}

ByteRange PsbRangeForOffsets(absl::Span<const uint8_t> bytes, uint64_t a, uint64_t b) {
  ByteRange range{0, bytes.size()};
  if (a >= bytes.size() || b <= a) return ByteRange{0, 0};
  range.begin = LastPsbAtOrBefore(bytes, a).value_or(0);
  if (b < bytes.size()) range.end = FirstPsbAtOrAfter(bytes, b).value_or(bytes.size());
  return range;
}

}  // namespace ptd::decoder
