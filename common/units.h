#pragma once
// Durations and byte sizes as users type them on the command line ("1us", "2.5ms",
// "2MB"): parsed strictly, so a typo is an error naming the value, never a silent 0.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ptd {

// "D[UNIT]" with UNIT ns, us, ms or s (a bare number is ns); D may have a fraction
// ("1.5ms"). Returns nanoseconds. Negative, empty, unknown units, overflow: an error.
absl::StatusOr<uint64_t> ParseDurationNs(absl::string_view text);

// "N[UNIT]" with UNIT B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024),
// case-insensitive (a bare number is bytes); N may have a fraction ("1.5MB").
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// "1.234 ms", "12 ns": for messages.
std::string FormatDurationNs(uint64_t ns);
// "1.91 MB", "512 B" (powers of 1000, as ParseByteSize reads "MB").
std::string FormatByteSize(uint64_t bytes);

}  // namespace ptd
