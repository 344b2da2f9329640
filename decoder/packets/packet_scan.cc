#include "decoder/packets/packet_scan.h"

namespace ptd::decoder {

pt_packet_decoder* NewPacketDecoder(const pt_config& config) {
  pt_config c = config;
  c.decode.callback = nullptr;
  c.decode.context = nullptr;
  return pt_pkt_alloc_decoder(&c);
}

pt_packet_decoder* NewPacketDecoder(const uint8_t* begin, size_t size) {
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t*>(begin);
  config.end = config.begin + size;
  return NewPacketDecoder(config);
}

uint64_t SkipPadRun(pt_packet_decoder* decoder, const uint8_t* begin, uint64_t offset, uint64_t bound) {
  uint64_t end = offset;
  while (end < bound && begin[end] == 0) ++end;  // pt_opc_pad
  // Within the decoder's buffer, so the move cannot fail.
  if (end != offset) pt_pkt_sync_set(decoder, end);
  return end;
}

}  // namespace ptd::decoder
