#pragma once
// `decode --window T0..T1` / `--window-offset A..B`: the stretch of a PT buffer to decode
// for a time (or byte) window, found from the PSB+ groups alone. A PSB+ carries a TSC
// when TSC is on, and a fresh decoder can start at any PSB (as parallel decoding does),
// so the stretch runs from the last PSB at or before the window's start to the first
// PSB at or after its end. Times only grow along a buffer, so the PSBs are found by
// binary search over the bytes: a window costs a few dozen PSB+ reads plus its own
// decode, whatever the size of the trace.

#include <cstdint>
#include <optional>

#include "absl/types/span.h"
#include "common/trace_meta.h"

namespace ptd::decoder {

struct PsbTime {
  uint64_t offset = 0;  // of the PSB in the buffer
  uint64_t time = 0;    // ns, from the PSB+'s TSC
};

// The first PSB at or after `from` whose PSB+ holds a TSC, with its time.
std::optional<PsbTime> FirstTimedPsbAtOrAfter(absl::Span<const uint8_t> bytes, uint64_t from,
                                              const TimeConversion& conversion);
std::optional<uint64_t> FirstPsbAtOrAfter(absl::Span<const uint8_t> bytes, uint64_t from);
std::optional<uint64_t> LastPsbAtOrBefore(absl::Span<const uint8_t> bytes, uint64_t at);

struct ByteRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  bool empty() const { return begin >= end; }
};

// The bytes to decode for times [t0, t1) (t1 exclusive): from the last PSB with a time
// at or before t0 (the buffer's start when none) to the first PSB with a time at or
// after t1 (the buffer's end when none). Empty when the buffer's first PSB comes at or
// after t1.
ByteRange PsbRangeForTimes(absl::Span<const uint8_t> bytes, uint64_t t0, uint64_t t1,
                           const TimeConversion& conversion);
// The same for byte offsets [a, b) of the buffer.
ByteRange PsbRangeForOffsets(absl::Span<const uint8_t> bytes, uint64_t a, uint64_t b);

}  // namespace ptd::decoder
