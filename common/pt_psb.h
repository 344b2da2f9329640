#pragma once
// The PSB packets of an Intel PT buffer and the TSC each PSB+ carries, read with libipt's
// packet layer: where a fresh decoder can start, and when. Decoder windows and the
// recorder's --trim both cut traces there.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"

namespace ptd {

// The bytes of a PSB packet (libipt's ptps_psb).
inline constexpr uint64_t kPsbSize = 16;

struct PsbTsc {
  uint64_t offset = 0;         // of the PSB in the buffer
  std::optional<uint64_t> tsc;  // the TSC packet of its PSB+ (none when TSC is off)
};

// The offset of every PSB pattern in `bytes`, in order, not overlapping (the resync
// remedy and the pieces' borders need them). A byte search, no packet decoding: a
// pattern inside another packet's payload counts too.
std::vector<uint64_t> FindPsbOffsets(absl::Span<const uint8_t> bytes);

// Every PSB of `bytes`, in order, with its PSB+'s TSC.
std::vector<PsbTsc> FindPsbsWithTsc(absl::Span<const uint8_t> bytes);

// Where to cut a buffer of `size` bytes into about `parts` stretches of equal length, at
// PSBs (`psbs`, sorted), so each can be scanned on a thread of its own: the cuts, each a
// PSB offset in (0, size), increasing; none when `parts` < 2 or the buffer is under
// `min_bytes`.
std::vector<uint64_t> CutsAtPsbs(uint64_t size, const std::vector<uint64_t>& psbs, int parts, uint64_t min_bytes);

// The TSC of the PSB+ of the PSB at `offset` (none when there is no PSB there or its PSB+
// has no TSC).
std::optional<uint64_t> PsbPlusTscAt(absl::Span<const uint8_t> bytes, uint64_t offset);

}  // namespace ptd
