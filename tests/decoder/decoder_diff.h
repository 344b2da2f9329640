#pragma once
// The differential check of the fast flow decoder against libipt's block decoder: both
// decode the same trace directory; their flow events (per stream, in order), statistics
// and FTF bytes must be identical.

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"

#include "decoder/trace_decoder.h"

namespace ptd::decoder::testing {

// "" when the fast decoder and libipt's block decoder give the same output for `trace`
// with `options` (decoder and observers are set here); otherwise the first difference:
// the event's index, kind, IP and trace offset under both decoders.
std::string CompareFastWithLibiptBlock(const std::string& trace, DecodeOptions options = DecodeOptions());

// Corrupt traces: as above, except where a corrupt IP leads the decoders into bytes the
// program never executed (an IP inside an instruction, data): Zydis and libipt's length
// decoder disagree on such bytes (an illegal LOCK prefix, invalid VEX fields), so from
// there the two walks may differ by design. When the events differ, the blocks both
// decoders ran are looked at: if either started or ended one at an address outside
// `executed` (every instruction the program ran), the result is "" with
// `*into_non_code` set; a difference with both on executed code is reported as usual.
std::string CompareFastWithLibiptBlockOnCorruptTrace(const std::string& trace, DecodeOptions options,
                                                     const absl::flat_hash_set<uint64_t>& executed,
                                                     bool* into_non_code);

}  // namespace ptd::decoder::testing
