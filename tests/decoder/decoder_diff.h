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

}  // namespace ptd::decoder::testing
