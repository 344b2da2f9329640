#pragma once
// The differential check of the fast flow decoder against libipt's block decoder: both
// decode the same trace directory; their flow events (per stream, in order), statistics
// and FTF bytes must be identical.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"

#include "decoder/flow/flow_decoder.h"
#include "decoder/stats.h"
#include "decoder/trace_decoder.h"
#include "image/module_cache.h"
#include "image/process_image.h"
#include "tests/decoder/packet_writer.h"

namespace ptd::decoder::testing {

// "" when the flow events of libipt's block decoder (`block`) and the fast decoder
// (`fast`) are the same; otherwise the first difference, as below.
std::string FirstFlowDifference(const std::vector<FlowEvent>& block, const std::vector<FlowEvent>& fast);

// A hand-made stream (`padded`: `size` bytes and kPtPadding zeros) decoded by `kind`
// over one process whose code is `mapping`; `shared`: the decode's shared runs (fast
// decoder), or null.
struct DecodedStream {
  std::vector<FlowEvent> events;
  uint64_t instructions = 0;
  Stats stats;
};
DecodedStream DecodeOverMapping(DecoderKind kind, const image::Mapping& mapping, const uint8_t* padded, size_t size,
                                image::ModuleCache* modules, SectionBlockCache* shared = nullptr);
// A hand-made program (`code`, written to a file in `dir` and mapped at `base`) and the
// stream `write` makes over it, decoded by libipt's block decoder and by the fast decoder.
struct BothDecoders {
  DecodedStream block;
  DecodedStream fast;
  // "" when their flow events are the same; else the first difference, then both lists.
  std::string difference;
};
BothDecoders DecodeProgramBothWays(const std::string& dir, const std::vector<uint8_t>& code, uint64_t base,
                                   void (*write)(PacketWriter*));
// What a decode gave, counted: instructions and the flow events of each kind tests check.
struct FlowCounts {
  uint64_t instructions = 0;
  int calls = 0;
  int returns = 0;
  int syscalls = 0;
  int errors = 0;
  bool operator==(const FlowCounts&) const = default;
};
FlowCounts CountFlow(const DecodedStream& decoded);
void PrintTo(const FlowCounts& counts, std::ostream* os);
// Both decoders gave the same flow events, and `expected` (gtest expectations).
void ExpectBothGave(const BothDecoders& both, const FlowCounts& expected);

// "" when the fast decoder and libipt's block decoder give the same output for `trace`
// with `options` (decoder and observers are set here); otherwise the first difference:
// the event's index, kind, IP and trace offset under both decoders.
std::string CompareFastWithLibiptBlock(const std::string& trace, DecodeOptions options = DecodeOptions());

// Corrupt traces: as above, except where there is no one right reading, and then the
// result is "" with `*excuse` saying why:
// - a corrupt IP led a decoder into bytes the program never executed (any block it ran
//   starts or ends outside `executed`, every instruction the program ran): Zydis and
//   libipt's length decoder disagree on such bytes (an illegal LOCK prefix, invalid VEX
//   fields);
// - libipt's block and instruction decoders themselves give different instruction
//   counts for the stream.
// A difference with neither is reported as usual.
std::string CompareFastWithLibiptBlockOnCorruptTrace(const std::string& trace, DecodeOptions options,
                                                     const absl::flat_hash_set<uint64_t>& executed,
                                                     std::string* excuse);

}  // namespace ptd::decoder::testing
