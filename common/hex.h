#pragma once
// Bytes as lower-case hex: build-ids, digests, byte dumps in messages.

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace ptd {

// "0a1b..." (two digits per byte, no separators).
std::string HexString(absl::Span<const uint8_t> bytes);

}  // namespace ptd
