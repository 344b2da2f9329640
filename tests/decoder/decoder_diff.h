#pragma once
// The differential check of the fast flow decoder against libipt's block decoder: both
// decode the same trace directory; their flow events (per stream, in order), statistics
// and FTF bytes must be identical.

#include <string>

#include "decoder/trace_decoder.h"

namespace ptd::decoder::testing {

// "" when the fast decoder and libipt's block decoder give the same output for `trace`
// with `options` (decoder and observers are set here); otherwise the first difference:
// the event's index, kind, IP and trace offset under both decoders.
std::string CompareFastWithLibiptBlock(const std::string& trace, DecodeOptions options = DecodeOptions());

// Corrupt traces: as above, except that when the first difference is an "unknown
// instruction" error of either decoder, the comparison ends there with "" and
// `*into_non_code` set. A corrupt IP leads both decoders into bytes that are not code,
// and Zydis and libipt's length decoder disagree on where such bytes stop decoding (an
// illegal LOCK prefix, invalid VEX fields): from there the two walks differ by design.
std::string CompareFastWithLibiptBlockUpToNonCode(const std::string& trace, DecodeOptions options,
                                                  bool* into_non_code);

}  // namespace ptd::decoder::testing
