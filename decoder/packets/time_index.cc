#include "decoder/packets/time_index.h"

#include <algorithm>
#include <iterator>

#include "decoder/packets/packet_scan.h"

namespace ptd::decoder {

// What the query does with each packet's time, in stream order: the header's TSC and CBR
// between a PSB and its PSBEND (or an OVF), the others as anywhere.
class TimeIndex::Fold {
 public:
  Fold(const pt_config& config, TimeIndex* index) : time_(config), index_(index) {}

  void OnPacket(const IndexedPacket& p) {
    switch (static_cast<PacketKind>(p.kind)) {
      case PacketKind::kPsb:
        index_->at_psbs_.emplace_back(p.offset, time_.calibration());
        time_.OnPsb();
        in_header_ = true;
        return;
      case PacketKind::kPsbend:
        in_header_ = false;
        Timed(p.offset);
        return;
      case PacketKind::kOvf: {
        in_header_ = false;
        const PacketTime::State state = time_.state();
        time_.Reset();
        time_.set_state(state);
        return;
      }
      case PacketKind::kTsc:
        if (in_header_) {
          time_.OnHeaderTsc(p.value);
        } else {
          time_.OnTsc(p.value);
        }
        return;
      case PacketKind::kCbr:
        if (in_header_) {
          time_.OnHeaderCbr(p.aux);
        } else {
          time_.OnCbr(p.aux);
        }
        return;
      case PacketKind::kTma: time_.OnTma(static_cast<uint32_t>(p.value & 0xffff), p.value >> 16); return;
      case PacketKind::kMtc: time_.OnMtc(p.aux); return;
      case PacketKind::kCyc: time_.OnCyc(p.value); return;
      // Branch packets, and the end of a PSB+ (the time a decoder starts from): events
      // bring their own time (pt_event::tsc), and the flow decoders read event packets
      // before the instructions they bind to have run.
      case PacketKind::kTnt:
      case PacketKind::kTip: Timed(p.offset); return;
      default: return;
    }
  }

 private:
  void Timed(uint64_t offset) {
    const PacketTime::State& state = time_.state();
    const uint64_t tsc = state.have_tsc ? state.tsc : 0;
    std::vector<Entry>& entries = index_->entries_;
    if (entries.empty() ? tsc != 0 : tsc != entries.back().tsc) entries.push_back({offset, tsc});
  }

  PacketTime time_;
  TimeIndex* index_;
  bool in_header_ = false;
};

TimeIndex TimeIndex::Build(const pt_config& config, const PacketIndex* packets) {
  TimeIndex index;
  Fold fold(config, &index);
  if (packets != nullptr) {
    packets->ForEachPacket([&](const IndexedPacket& p) { fold.OnPacket(p); });
    return index;
  }
  pt_packet_decoder* decoder = NewPacketDecoder(config);
  if (decoder == nullptr) return index;
  const uint64_t size = static_cast<uint64_t>(config.end - config.begin);
  WalkPackets(decoder, config.begin, size, std::nullopt,
              [&](const pt_packet& packet, uint64_t offset) { fold.OnPacket(PackPacket(packet, offset)); });
  pt_pkt_free_decoder(decoder);
  return index;
}

uint64_t TimeIndex::At(uint64_t offset) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), offset,
                             [](const Entry& e, uint64_t o) { return e.offset < o; });
  return it == entries_.begin() ? 0 : std::prev(it)->tsc;
}

const PacketTime::Calibration* TimeIndex::CalibrationAt(uint64_t psb) const {
  auto at = std::lower_bound(at_psbs_.begin(), at_psbs_.end(), psb,
                             [](const auto& entry, uint64_t offset) { return entry.first < offset; });
  return at != at_psbs_.end() && at->first == psb ? &at->second : nullptr;
}

void TimeCursor::Move(uint64_t offset) {
  // A few entries ahead: step (a decoder's next lookup is usually the next entry or so).
  constexpr size_t kSteps = 4;
  size_t from = 0;
  if (next_ == 0 || entries_[next_ - 1].offset < offset) {
    for (size_t k = 0; k < kSteps && next_ < size_ && entries_[next_].offset < offset; ++k) ++next_;
    if (next_ == size_ || entries_[next_].offset >= offset) return;
    from = next_;
  }
  const TimeIndex::Entry* it = std::lower_bound(entries_ + from, entries_ + size_, offset,
                                                [](const TimeIndex::Entry& e, uint64_t o) { return e.offset < o; });
  next_ = static_cast<size_t>(it - entries_);
}

}  // namespace ptd::decoder
