// PacketQuery's scan of a buffer: the packet index, the CYC groups and what Accepts
// weighs, in one pass (in stretches cut at PSBs, on threads for large buffers).

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "common/pt_psb.h"
#include "decoder/packets/packet_query.h"
#include "decoder/packets/packet_scan.h"

namespace ptd::decoder {

namespace {

constexpr uint8_t kExtOvf = 0xf3;  // pt_ext_ovf

}  // namespace

// The packets from `start` (a PSB) up to `stop`, the end of the buffer, or a PSB in
// `seen` (sorted; one met before at a packet boundary).
PacketQuery::Chain PacketQuery::ScanChain(const pt_config& config, uint64_t start, uint64_t stop,
                                          uint64_t chunk_packets, const std::vector<uint64_t>* seen) {
  Chain chain;
  const uint64_t size = static_cast<uint64_t>(config.end - config.begin);
  pt_packet_decoder* pkt = NewPacketDecoder(config);
  if (pkt == nullptr || pt_pkt_sync_set(pkt, start) < 0) {
    if (pkt != nullptr) pt_pkt_free_decoder(pkt);
    chain.ok = false;
    return chain;
  }
  static_assert(static_cast<uint8_t>(Kind::kPad) == PacketIndex::kPadKind && static_cast<uint8_t>(Kind::kOther) <= PacketIndex::kKindMask);
  PacketIndex::Writer index(chunk_packets, std::min(stop, size));
  uint64_t next = start;
  while (true) {
    const uint64_t offset = next;
    if (offset >= stop) {
      chain.met_stop = offset == stop;
      break;
    }
    pt_packet packet;
    int status = pt_pkt_next(pkt, &packet, sizeof packet);
    next += static_cast<uint64_t>(status > 0 ? status : 0);
    if (status < 0) {
      chain.ok = status == -pte_eos && offset == size;
      chain.met_stop = chain.ok && stop >= size;
      break;
    }
    // One switch classifies it for the index and for Accepts (kOther: not modelled).
    const Packed packed = PackPacket(packet, offset);
    const Kind kind = static_cast<Kind>(packed.kind);
    if (kind == Kind::kOther) {
      chain.ok = false;
      break;
    }
    if (kind == Kind::kOvf) chain.has_ovf = true;
    // One compare for the three timing kinds (three of them cost the scan 60 M
    // instructions on the 60 M walker: the loop's registers spilled).
    static_assert(Kind::kTma < Kind::kMtc && Kind::kMtc < Kind::kCyc && Kind::kCyc < Kind::kOther &&
                  static_cast<int>(Kind::kOther) == static_cast<int>(Kind::kCyc) + 1);
    if (kind >= Kind::kTma) [[unlikely]] {  // kTma, kMtc, kCyc (kOther left above)
      chain.has_timing = true;
      if (kind == Kind::kCyc) chain.cycles.OnCyc(packed.value);
      // check_erratum_skd007: a 2-byte CYC whose second byte is an extended opcode, an
      // OVF's second byte after it.
      if (kind == Kind::kCyc && packed.size == 2 && (packed.value & ~uint64_t{0x1f}) == 0x20 && offset + 2 < size &&
          config.begin[offset + 2] == kExtOvf) {
        chain.has_skd007_cyc = true;
      }
    } else if (chain.cycles.open) [[unlikely]] {
      // The packet CYCs before it time, unless the query decoder reads ahead over it. Only
      // after a CYC: the test of every packet cost the walker's scan 50 M instructions.
      if (!CycleIndex::IsTimingPacket(packet.type)) chain.cycles.OnTimed(offset);
    }
    if (kind == Kind::kPad) {
      // The index covers the bytes between packets as PADs: nothing to add.
      next = SkipPadRun(pkt, config.begin, next, std::min(stop, size));
      continue;
    }
    if (chunk_packets != 0) index.Add(packed);
    if (packet.type == ppt_psb) {
      if (seen != nullptr && offset != start && std::binary_search(seen->begin(), seen->end(), offset)) break;
      chain.psbs.push_back(offset);
    }
  }
  if (chunk_packets != 0) chain.chunks = index.Finish();
  pt_pkt_free_decoder(pkt);
  return chain;
}

// What a chain met that Accepts weighs, added to the scan's.
void PacketQuery::NoteFlags(const Chain& chain, Scan* scan) {
  scan->has_ovf = scan->has_ovf || chain.has_ovf;
  scan->has_timing = scan->has_timing || chain.has_timing;
  scan->has_skd007_cyc = scan->has_skd007_cyc || chain.has_skd007_cyc;
}

PacketQuery::Scan PacketQuery::ScanBytes(const pt_config& config, int threads, uint64_t chunk_packets) {
  Scan scan;
  pt_packet_decoder* pkt = NewPacketDecoder(config);
  if (pkt == nullptr) return scan;
  const uint64_t size = static_cast<uint64_t>(config.end - config.begin);
  // Every place a sync can land: each PSB pattern (a mutated stream may hold one inside
  // another packet's payload, so each is scanned on its own until it meets a packet
  // boundary seen before).
  std::vector<uint64_t> starts;
  while (pt_pkt_sync_forward(pkt) >= 0) {
    uint64_t offset = 0;
    pt_pkt_get_sync_offset(pkt, &offset);
    starts.push_back(offset);
  }
  const bool indexed = size <= kMaxIndexedBytes;
  const uint64_t index_chunk = indexed ? std::max<uint64_t>(chunk_packets, 1) : 0;
  bool ok = true;
  std::vector<uint64_t> seen_psbs;  // PSB packets met at a packet boundary (sorted)
  auto packets = std::make_shared<PacketIndex>(size);
  std::shared_ptr<CycleIndex> cycles;
  if (!starts.empty()) {
    // The chain from the first PSB, indexed: in stretches cut at PSBs, read by `threads`
    // threads when asked. Many stretches (of 128 KiB or more), taken in turn: packets
    // are denser in some parts of a trace than in others (the 60 M walker's last eighth
    // holds twice the packets of the others), so equal bytes are not equal work, and a
    // thread that takes a dense stretch last keeps the others waiting. They must meet
    // where one scan would pass (each cut's PSB on a packet boundary); otherwise, or
    // where one fails, what one scan finds decides.
    constexpr uint64_t kMinStretchBytes = uint64_t{128} << 10;
    const int stretches =
        threads > 1 ? static_cast<int>(std::clamp<uint64_t>(size / kMinStretchBytes, threads, threads * 16)) : 1;
    std::vector<uint64_t> cuts = CutsAtPsbs(size, starts, stretches, kMinParallelScanBytes);
    std::vector<Chain> parts(cuts.size() + 1);
    cuts.insert(cuts.begin(), starts.front());
    cuts.push_back(UINT64_MAX);
    std::atomic<size_t> next_part{0};
    auto scan_parts = [&] {
      for (size_t k; (k = next_part.fetch_add(1)) < parts.size();) {
        parts[k] = ScanChain(config, cuts[k], cuts[k + 1], index_chunk);
      }
    };
    std::vector<std::thread> workers;
    for (int t = 1; t < std::min<int>(threads, static_cast<int>(parts.size())); ++t) workers.emplace_back(scan_parts);
    scan_parts();
    for (std::thread& t : workers) t.join();
    bool whole = true;
    for (size_t k = 0; k + 1 < parts.size(); ++k) whole = whole && parts[k].ok && parts[k].met_stop;
    if (!whole) {
      parts.clear();
      parts.push_back(ScanChain(config, starts.front(), UINT64_MAX, index_chunk));
      cuts.assign(1, starts.front());
    }
    std::vector<CycleIndex::Stretch> cycle_stretches;
    for (Chain& part : parts) {
      cycle_stretches.push_back(std::move(part.cycles));
      packets->Append(std::move(part.chunks));
      seen_psbs.insert(seen_psbs.end(), part.psbs.begin(), part.psbs.end());
      NoteFlags(part, &scan);
      ok = ok && part.ok;
    }
    cycles = std::make_shared<CycleIndex>(CycleIndex::Join(&cycle_stretches, cuts));
  }
  // The other PSBs (inside a packet of that chain: mutated data), each until it meets a
  // packet boundary seen before.
  for (uint64_t start : starts) {
    if (!ok) break;
    if (std::binary_search(seen_psbs.begin(), seen_psbs.end(), start)) continue;
    const Chain chain = ScanChain(config, start, UINT64_MAX, 0, &seen_psbs);
    ok = chain.ok;
    NoteFlags(chain, &scan);
    for (uint64_t psb : chain.psbs) seen_psbs.insert(std::upper_bound(seen_psbs.begin(), seen_psbs.end(), psb), psb);
  }
  pt_pkt_free_decoder(pkt);
  scan.supported = ok;
  if (ok) scan.cycles = std::move(cycles);
  if (ok && indexed) scan.packets = std::move(packets);
  if (ok) scan.times = std::make_shared<SharedTimeIndex>(scan.packets);
  return scan;
}

bool PacketQuery::Accepts(const pt_config& config, const Scan& scan) {
  if (!scan.supported) return false;
  if (config.decode.callback != nullptr) return false;
  // These change how pt_qry reads an OVF (look-ahead repairs not modelled here).
  if (scan.has_ovf && (config.errata.skd010 || config.errata.apl11 || config.errata.apl12)) return false;
  // pt_qry_decode_cyc skips such a CYC's first byte into the OVF (not modelled here).
  if (scan.has_skd007_cyc && config.errata.skd007) return false;
  if (scan.has_timing && config.mtc_freq > PacketTime::kMaxMtcFreq) return false;
  return true;
}

}  // namespace ptd::decoder
