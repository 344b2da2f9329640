#include "tests/testing/psb_stream.h"

#include <intel-pt.h>

#include <cstdlib>

namespace ptd::testing {

std::vector<uint8_t> PsbStream(const std::vector<std::optional<uint64_t>>& tscs,
                               std::vector<uint64_t>* psb_offsets, int pads) {
  std::vector<uint8_t> bytes(tscs.size() * (64 + static_cast<size_t>(pads)));
  pt_config config;
  pt_config_init(&config);
  config.begin = bytes.data();
  config.end = bytes.data() + bytes.size();
  pt_encoder* encoder = pt_alloc_encoder(&config);
  if (encoder == nullptr) std::abort();
  auto put = [&](pt_packet_type type, uint64_t tsc = 0) {
    pt_packet packet{};
    packet.type = type;
    if (type == ppt_tsc) packet.payload.tsc.tsc = tsc;
    if (pt_enc_next(encoder, &packet) < 0) std::abort();  // the buffer is sized for it
  };
  uint64_t offset = 0;
  for (const std::optional<uint64_t>& tsc : tscs) {
    pt_enc_get_offset(encoder, &offset);
    if (psb_offsets != nullptr) psb_offsets->push_back(offset);
    put(ppt_psb);
    if (tsc) put(ppt_tsc, *tsc);
    put(ppt_psbend);
    for (int i = 0; i < pads; ++i) put(ppt_pad);
  }
  pt_enc_get_offset(encoder, &offset);
  pt_free_encoder(encoder);
  bytes.resize(offset);
  return bytes;
}

}  // namespace ptd::testing
