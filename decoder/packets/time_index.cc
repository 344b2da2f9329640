#include "decoder/packets/time_index.h"

#include <algorithm>
#include <iterator>

#include "decoder/packets/packet_scan.h"
#include "decoder/packets/packet_time.h"

namespace ptd::decoder {

TimeIndex TimeIndex::Build(const pt_config& config) {
  TimeIndex index;
  pt_packet_decoder* decoder = NewPacketDecoder(config);
  if (decoder == nullptr) return index;
  const uint64_t size = static_cast<uint64_t>(config.end - config.begin);
  PacketTime time(config);
  bool in_header = false;
  WalkPackets(decoder, config.begin, size, std::nullopt, [&](const pt_packet& packet, uint64_t offset) {
    // What the query does with each packet's time (PacketQuery::PsbCalibrations::Fold
    // for the calibration): the header's TSC and CBR between a PSB and its PSBEND.
    switch (packet.type) {
      case ppt_psb:
        time.OnPsb();
        in_header = true;
        break;
      case ppt_psbend: in_header = false; break;
      case ppt_ovf: {
        in_header = false;
        const PacketTime::State state = time.state();
        time.Reset();
        time.set_state(state);
        break;
      }
      case ppt_tsc:
        if (in_header) {
          time.OnHeaderTsc(packet.payload.tsc.tsc);
        } else {
          time.OnTsc(packet.payload.tsc.tsc);
        }
        break;
      case ppt_cbr:
        if (in_header) {
          time.OnHeaderCbr(packet.payload.cbr.ratio);
        } else {
          time.OnCbr(packet.payload.cbr.ratio);
        }
        break;
      case ppt_tma: time.OnTma(packet.payload.tma.ctc, packet.payload.tma.fc); break;
      case ppt_mtc: time.OnMtc(packet.payload.mtc.ctc); break;
      case ppt_cyc: time.OnCyc(packet.payload.cyc.value); break;
      default: break;
    }
    // Branch packets, and the end of a PSB+ (the time a decoder starts from): events
    // bring their own time (pt_event::tsc), and the flow decoders read event packets
    // before the instructions they bind to have run.
    if (packet.type != ppt_tnt_8 && packet.type != ppt_tnt_64 && packet.type != ppt_tip && packet.type != ppt_psbend) {
      return;
    }
    const PacketTime::State& state = time.state();
    const uint64_t tsc = state.have_tsc ? state.tsc : 0;
    if (index.entries_.empty() ? tsc != 0 : tsc != index.entries_.back().tsc) index.entries_.push_back({offset, tsc});
  });
  pt_pkt_free_decoder(decoder);
  return index;
}

uint64_t TimeIndex::At(uint64_t offset) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), offset,
                             [](const Entry& e, uint64_t o) { return e.offset < o; });
  return it == entries_.begin() ? 0 : std::prev(it)->tsc;
}

}  // namespace ptd::decoder
