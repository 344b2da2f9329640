#pragma once
// One sysfs PMU format field ("config:14-17", "config1:0-31", "config:0-7,32-35"): which
// perf_event_attr config word it lives in and at which bits. Parsed from
// /sys/bus/event_source/devices/<pmu>/format/<name>, never hard-coded, because bit
// positions belong to the kernel's PMU driver, not to us.

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ptd::pt {

// perf_event_attr.config, .config1, .config2.
using PmuConfigWords = std::array<uint64_t, 3>;

struct PmuFormatField {
  int word = 0;                             // 0: config, 1: config1, 2: config2
  std::vector<std::pair<int, int>> ranges;  // [low, high] bit ranges, value's low bits first

  int Width() const;
  // Places `value` into `words`; InvalidArgument when it does not fit.
  absl::Status Encode(uint64_t value, PmuConfigWords& words) const;
  uint64_t Decode(const PmuConfigWords& words) const;
  size_t word_index() const { return static_cast<size_t>(word); }
};

// `source` names the file in error messages.
absl::StatusOr<PmuFormatField> ParsePmuFormatField(absl::string_view text,
                                                   absl::string_view source);

}  // namespace ptd::pt
