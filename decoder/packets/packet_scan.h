#pragma once
// libipt packet decoders as the scans use them, and runs of PADs passed over at once.

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <optional>

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

// How a walk over a buffer's packets (WalkPackets) ended.
struct PacketWalkEnd {
  bool aligned = false;  // read to the end of the bytes, nothing undecodable on the way
};

// Every packet of `decoder`'s bytes [begin, begin + size), in order, from the PSB at
// `start` (none: the first PSB): `on_packet(const pt_packet&, uint64_t offset)`. Runs of
// PADs are passed over unseen (SkipPadRun). Undecodable bytes: on at the next PSB, as the
// flow decoders do; a second failure at or before the first one's place ends the walk.
template <typename OnPacket>
PacketWalkEnd WalkPackets(pt_packet_decoder* decoder, const uint8_t* begin, uint64_t size,
                          std::optional<uint64_t> start, OnPacket&& on_packet) {
  uint64_t failed_at = 0;
  bool failed = false;
  int status = start.has_value() ? pt_pkt_sync_set(decoder, *start) : pt_pkt_sync_forward(decoder);
  uint64_t offset = 0;
  while (status >= 0) {
    pt_pkt_get_offset(decoder, &offset);
    pt_packet packet;
    status = pt_pkt_next(decoder, &packet, sizeof packet);
    if (status < 0) {
      if (status == -pte_eos) break;
      if (failed && offset <= failed_at) break;
      failed = true;
      failed_at = offset;
      status = pt_pkt_sync_forward(decoder);
      continue;
    }
    if (packet.type == ppt_pad) {
      SkipPadRun(decoder, begin, offset + 1, size);
      continue;
    }
    on_packet(packet, offset);
  }
  PacketWalkEnd end;
  end.aligned = !failed && status == -pte_eos && pt_pkt_get_offset(decoder, &offset) >= 0 && offset == size;
  return end;
}

}  // namespace ptd::decoder
