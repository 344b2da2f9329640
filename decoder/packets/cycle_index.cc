#include "decoder/packets/cycle_index.h"

#include <intel-pt.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "common/pt_psb.h"
#include "decoder/packets/packet_scan.h"

namespace ptd::decoder {

bool CycleIndex::IsTimingPacket(int type) {
  switch (type) {
    case ppt_pad:
    case ppt_cyc:
    case ppt_mtc:
    case ppt_tsc:
    case ppt_tma:
    case ppt_cbr:
      return true;
    default:
      return false;
  }
}

// One stretch of a buffer: from its first PSB (`from` 0) or from the PSB at `from`, to
// `to`.
CycleIndex::Stretch CycleIndex::Scan(const uint8_t* padded, uint64_t from, uint64_t to) {
  Stretch part;
  pt_packet_decoder* decoder = NewPacketDecoder(padded, static_cast<size_t>(to));
  if (decoder == nullptr) return part;
  const std::optional<uint64_t> start = from == 0 ? std::nullopt : std::optional<uint64_t>(from);
  part.aligned = WalkPackets(decoder, padded, to, start, [&part](const pt_packet& packet, uint64_t offset) {
                   if (packet.type == ppt_cyc) {
                     part.OnCyc(packet.payload.cyc.value);
                   } else if (!IsTimingPacket(packet.type)) {
                     part.OnTimed(offset);
                   }
                 }).aligned;
  pt_pkt_free_decoder(decoder);
  return part;
}

CycleIndex CycleIndex::Join(std::vector<Stretch>* stretches, const std::vector<uint64_t>& starts) {
  CycleIndex index;
  for (size_t k = 0; k < stretches->size(); ++k) {
    Stretch& part = (*stretches)[k];
    const uint64_t base = index.total_;
    if (k == 0) {
      index.entries_ = std::move(part.entries);
    } else {
      for (const Entry& e : part.entries) index.entries_.push_back({e.offset, base + e.cycles});
    }
    index.total_ += part.total;
    index.cyc_packets_ += part.cyc_packets;
    // CYCs just before the next stretch's PSB time that PSB.
    if (part.open && k + 1 < stretches->size()) index.entries_.push_back({starts[k + 1], index.total_});
  }
  return index;
}

CycleIndex CycleIndex::Build(const uint8_t* padded, size_t size) {
  std::vector<Stretch> parts;
  parts.push_back(Scan(padded, 0, size));
  return Join(&parts, {0});
}

CycleIndex CycleIndex::Build(const uint8_t* padded, size_t size, const std::vector<uint64_t>& psbs, int threads) {
  // Stretches of about size / threads bytes, cut at PSBs; small buffers in one.
  std::vector<uint64_t> cuts = CutsAtPsbs(size, psbs, threads, kMinParallelBytes);
  if (cuts.empty()) return Build(padded, size);
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(size);
  std::vector<Stretch> parts(cuts.size() - 1);
  std::vector<std::thread> workers;
  for (size_t k = 1; k < parts.size(); ++k) {
    workers.emplace_back([&, k] { parts[k] = Scan(padded, cuts[k], cuts[k + 1]); });
  }
  parts[0] = Scan(padded, 0, cuts[1]);
  for (std::thread& t : workers) t.join();
  // The stretches must meet where one scan would pass: at each cut's PSB, on a packet
  // boundary. Otherwise (a PSB pattern inside a packet, undecodable bytes) one scan.
  for (size_t k = 0; k + 1 < parts.size(); ++k) {
    if (!parts[k].aligned) return Build(padded, size);
  }
  return Join(&parts, cuts);
}

uint64_t CycleIndex::At(uint64_t offset) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), offset,
                             [](const Entry& e, uint64_t o) { return e.offset < o; });
  return it == entries_.begin() ? 0 : std::prev(it)->cycles;
}

void CycleCursor::Move(uint64_t offset) {
  auto first_not_before = [&](size_t from, size_t to) {
    return static_cast<size_t>(std::lower_bound(entries_ + from, entries_ + to, offset,
                                                [](const CycleIndex::Entry& e, uint64_t o) { return e.offset < o; }) -
                               entries_);
  };
  if (next_ < size_ && entries_[next_].offset < offset) {
    // Forward: usually by one group; a jump (a piece's start) searches.
    ++next_;
    if (next_ < size_ && entries_[next_].offset < offset) next_ = first_not_before(next_, size_);
  } else {
    next_ = first_not_before(0, next_);  // back: a resync at an earlier PSB
  }
  Raise(base_ + (next_ > 0 ? entries_[next_ - 1].cycles : 0));
}

bool StreamHasPacket(absl::Span<const uint8_t> bytes, int type, size_t limit, int max_psb_groups) {
  pt_packet_decoder* decoder = NewPacketDecoder(bytes.data(), bytes.size());
  if (decoder == nullptr) return false;
  bool found = false;
  uint64_t first_psb = 0;
  if (pt_pkt_sync_forward(decoder) >= 0 && pt_pkt_get_sync_offset(decoder, &first_psb) >= 0) {
    pt_packet packet;
    uint64_t offset = 0;
    while (pt_pkt_next(decoder, &packet, sizeof packet) >= 0) {
      if (packet.type == type) {
        found = true;
        break;
      }
      if (packet.type == ppt_psbend && --max_psb_groups == 0) break;
      // The limit counts from the first PSB: the bytes before it (a wrapped buffer's
      // head) hold no packets to look at.
      if (pt_pkt_get_offset(decoder, &offset) < 0 || offset - first_psb > limit) break;
      if (packet.type == ppt_pad) SkipPadRun(decoder, bytes.data(), offset, bytes.size());
    }
  }
  pt_pkt_free_decoder(decoder);
  return found;
}

bool StreamHasCyc(absl::Span<const uint8_t> bytes, size_t limit) { return StreamHasPacket(bytes, ppt_cyc, limit); }

}  // namespace ptd::decoder
