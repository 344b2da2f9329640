#pragma once
// libipt packet decoders as the scans use them, and runs of PADs passed over at once.

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>

namespace ptd::decoder {

// A packet decoder over `config`'s bytes, without its decode callback (the scans read
// what libipt knows; an unknown packet ends them).
pt_packet_decoder* NewPacketDecoder(const pt_config& config);
// Over [begin, begin + size), with libipt's defaults.
pt_packet_decoder* NewPacketDecoder(const uint8_t* begin, size_t size);

// The end of the run of PADs at `offset` (at most `bound`), `decoder` moved there. A PAD
// is the one-byte packet 0x00, and hardware pads in runs (60 % of the mruby sample's
// packets are PADs, in runs of ~4): one byte compare each instead of a pt_pkt_next.
// PADs make no flow and no timing, so a scan may pass over them unseen.
uint64_t SkipPadRun(pt_packet_decoder* decoder, const uint8_t* begin, uint64_t offset, uint64_t bound);

}  // namespace ptd::decoder
