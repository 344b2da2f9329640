#pragma once
// Intel PT bytes made of PSB+ groups, for tests of what finds and cuts at PSBs.

#include <cstdint>
#include <optional>
#include <vector>

namespace ptd::testing {

// PSB+ groups (PSB, a TSC when given, PSBEND), each followed by `pads` PAD packets, as
// libipt's encoder writes them. Tracing stays disabled (no FUP), so the stream decodes
// without an image. `psb_offsets` (optional) receives where each PSB starts.
std::vector<uint8_t> PsbStream(const std::vector<std::optional<uint64_t>>& tscs,
                               std::vector<uint64_t>* psb_offsets = nullptr, int pads = 100);

}  // namespace ptd::testing
