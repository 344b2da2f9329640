#include "decoder/packets/packet_query.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "common/pt_psb.h"
#include "decoder/packets/packet_scan.h"

namespace ptd::decoder {

namespace {

constexpr int kOvfSize = 2;        // ptps_ovf
constexpr int kPsbendSize = 2;     // ptps_psbend
constexpr uint8_t kExtOvf = 0xf3;  // pt_ext_ovf

// MODE.Exec's bits (csl | csd << 1) as libipt reads them.
pt_exec_mode ExecMode(uint8_t bits) {
  pt_packet_mode_exec exec{};
  exec.csl = bits & 1;
  exec.csd = (bits >> 1) & 1;
  return pt_get_exec_mode(&exec);
}

}  // namespace

[[gnu::always_inline]] inline PacketQuery::Packed PacketQuery::Pack(const pt_packet& packet, uint64_t offset) {
  Packed p;
  p.offset = static_cast<uint32_t>(offset);
  p.size = packet.size;
  switch (packet.type) {
    case ppt_pad: p.kind = static_cast<uint8_t>(Kind::kPad); break;
    case ppt_psb: p.kind = static_cast<uint8_t>(Kind::kPsb); break;
    case ppt_psbend: p.kind = static_cast<uint8_t>(Kind::kPsbend); break;
    case ppt_ovf: p.kind = static_cast<uint8_t>(Kind::kOvf); break;
    case ppt_tnt_8:
    case ppt_tnt_64:
      p.kind = static_cast<uint8_t>(Kind::kTnt);
      p.value = packet.payload.tnt.payload;
      p.aux = packet.payload.tnt.bit_size;
      break;
    case ppt_tip:
    case ppt_tip_pge:
    case ppt_tip_pgd:
    case ppt_fup:
      p.kind = static_cast<uint8_t>(packet.type == ppt_tip       ? Kind::kTip
                                    : packet.type == ppt_tip_pge ? Kind::kPge
                                    : packet.type == ppt_tip_pgd ? Kind::kPgd
                                                                 : Kind::kFup);
      p.value = packet.payload.ip.ip;
      p.aux = static_cast<uint8_t>(packet.payload.ip.ipc);
      break;
    case ppt_mode:
      if (packet.payload.mode.leaf != pt_mol_exec && packet.payload.mode.leaf != pt_mol_tsx) {
        p.kind = static_cast<uint8_t>(Kind::kOther);
        break;
      }
      p.kind = static_cast<uint8_t>(Kind::kMode);
      p.aux = static_cast<uint8_t>(packet.payload.mode.leaf);
      p.bits = packet.payload.mode.leaf == pt_mol_exec
                   ? static_cast<uint8_t>(packet.payload.mode.bits.exec.csl | packet.payload.mode.bits.exec.csd << 1)
                   : static_cast<uint8_t>(packet.payload.mode.bits.tsx.intx | packet.payload.mode.bits.tsx.abrt << 1);
      break;
    case ppt_tsc:
      p.kind = static_cast<uint8_t>(Kind::kTsc);
      p.value = packet.payload.tsc.tsc;
      break;
    case ppt_cbr:
      p.kind = static_cast<uint8_t>(Kind::kCbr);
      p.aux = packet.payload.cbr.ratio;
      break;
    case ppt_pip:
      p.kind = static_cast<uint8_t>(Kind::kPip);
      p.value = packet.payload.pip.cr3;
      p.aux = static_cast<uint8_t>(packet.payload.pip.nr);
      break;
    case ppt_vmcs:
      p.kind = static_cast<uint8_t>(Kind::kVmcs);
      p.value = packet.payload.vmcs.base;
      break;
    case ppt_stop: p.kind = static_cast<uint8_t>(Kind::kStop); break;
    case ppt_exstop:
      p.kind = static_cast<uint8_t>(Kind::kExstop);
      p.aux = packet.payload.exstop.ip;
      break;
    case ppt_mwait:
      p.kind = static_cast<uint8_t>(Kind::kMwait);
      p.value = packet.payload.mwait.hints | uint64_t{packet.payload.mwait.ext} << 32;
      break;
    case ppt_pwre:
      p.kind = static_cast<uint8_t>(Kind::kPwre);
      p.aux = packet.payload.pwre.state;
      p.bits = packet.payload.pwre.sub_state;
      p.value = packet.payload.pwre.hw;
      break;
    case ppt_pwrx:
      p.kind = static_cast<uint8_t>(Kind::kPwrx);
      p.aux = packet.payload.pwrx.last;
      p.bits = packet.payload.pwrx.deepest;
      p.value = packet.payload.pwrx.interrupt | packet.payload.pwrx.store << 1 | packet.payload.pwrx.autonomous << 2;
      break;
    case ppt_ptw:
      p.kind = static_cast<uint8_t>(Kind::kPtw);
      p.value = packet.payload.ptw.payload;
      p.aux = packet.payload.ptw.ip;
      p.bits = packet.payload.ptw.plc;
      break;
    case ppt_mnt:
      p.kind = static_cast<uint8_t>(Kind::kMnt);
      p.value = packet.payload.mnt.payload;
      break;
    case ppt_tma:
      p.kind = static_cast<uint8_t>(Kind::kTma);
      p.value = packet.payload.tma.ctc | uint64_t{packet.payload.tma.fc} << 16;
      break;
    case ppt_mtc:
      p.kind = static_cast<uint8_t>(Kind::kMtc);
      p.aux = packet.payload.mtc.ctc;
      break;
    case ppt_cyc:
      p.kind = static_cast<uint8_t>(Kind::kCyc);
      p.value = packet.payload.cyc.value;
      break;
    default: p.kind = static_cast<uint8_t>(Kind::kOther); break;
  }
  return p;
}

// --- The pre-scan --------------------------------------------------------------------

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
    const Packed packed = Pack(packet, offset);
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
  if (ok && indexed) {
    scan.packets = std::move(packets);
    scan.calibrations = std::make_shared<PsbCalibrations>();
  }
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

// --- Small pieces of libipt's state ------------------------------------------------

pt_event* PacketQuery::Queue::Enqueue() {
  const uint8_t idx = end;
  const uint8_t next = static_cast<uint8_t>((idx + 1) % kSlots);
  if (begin == (next + 1) % kSlots) return nullptr;
  end = next;
  std::memset(&events[idx], 0, sizeof events[idx]);
  return &events[idx];
}

pt_event* PacketQuery::Queue::Dequeue() {
  if (begin == end) return nullptr;
  pt_event* ev = &events[begin];
  begin = static_cast<uint8_t>((begin + 1) % kSlots);
  return ev;
}

pt_event* PacketQuery::Queue::Find(pt_event_type type) {
  for (uint8_t i = begin; i != end; i = static_cast<uint8_t>((i + 1) % kSlots)) {
    if (events[i].type == type) return &events[i];
  }
  return nullptr;
}

[[gnu::always_inline]] inline int PacketQuery::LastIp::Query(uint64_t* out) const {
  if (!have_ip) {
    if (out != nullptr) *out = 0;
    return -pte_noip;
  }
  if (suppressed) {
    if (out != nullptr) *out = 0;
    return -pte_ip_suppressed;
  }
  if (out != nullptr) *out = ip;
  return 0;
}

[[gnu::always_inline]] inline int PacketQuery::LastIp::Update(uint8_t ipc, uint64_t packet_ip) {
  uint64_t keep = 0;
  switch (ipc) {
    case pt_ipc_suppressed: suppressed = true; return 0;
    case pt_ipc_sext_48: {
      const uint64_t value = packet_ip & 0xffffffffffffull;
      ip = (value & (1ull << 47)) ? value | ~0xffffffffffffull : value;
      have_ip = true;
      suppressed = false;
      return 0;
    }
    case pt_ipc_update_16: keep = ~0xffffull; break;
    case pt_ipc_update_32: keep = ~0xffffffffull; break;
    case pt_ipc_update_48: keep = ~0xffffffffffffull; break;
    case pt_ipc_full: keep = 0; break;
    default: return -pte_bad_packet;
  }
  ip = (ip & keep) | (packet_ip & ~keep);
  have_ip = true;
  suppressed = false;
  return 0;
}

[[gnu::always_inline]] inline pt_event* PacketQuery::Standalone() {
  std::memset(&standalone_, 0, sizeof standalone_);
  return &standalone_;
}

// The next event, of `type`, standing alone, with the time.
pt_event* PacketQuery::TimedStandalone(pt_event_type type) {
  pt_event* ev = Standalone();
  ev->type = type;
  event_ = ev;
  time_.state().Stamp(ev);
  return ev;
}

// pt_qry_event_ip: a missing IP marks the event, it is no error.
[[gnu::always_inline]] inline int PacketQuery::EventIp(uint64_t* ip, pt_event* event) const {
  int status = ip_.Query(ip);
  if (status == -pte_noip || status == -pte_ip_suppressed) event->ip_suppressed = 1;
  return 0;
}

// --- Construction and sync ---------------------------------------------------------

std::atomic<uint64_t> PacketQuery::made_{0};

PacketQuery::PacketQuery(const pt_config& config, const Scan* scan) : config_(config), time_(config) {
  made_.fetch_add(1, std::memory_order_relaxed);
  config_.decode.callback = nullptr;
  config_.decode.context = nullptr;
  size_ = static_cast<uint64_t>(config.end - config.begin);
  if (scan != nullptr && scan->packets != nullptr && !scan->packets->empty()) {
    index_ = scan->packets;
    indexed_ = PacketIndex::Reader(index_.get());
    calibrations_ = scan->calibrations;
  }
  packets_ = NewPacketDecoder(config_);
  scan_ = NewPacketDecoder(config_);
  if (scan_ == nullptr && packets_ != nullptr) {
    pt_pkt_free_decoder(packets_);
    packets_ = nullptr;
  }
}

PacketQuery::~PacketQuery() {
  if (packets_ != nullptr) pt_pkt_free_decoder(packets_);
  if (scan_ != nullptr) pt_pkt_free_decoder(scan_);
}

void PacketQuery::Reset() {
  enabled_ = false;
  consume_packet_ = false;
  event_ = nullptr;
  ip_ = LastIp();
  tnt_ = 0;
  tnt_index_ = 0;
  time_.Reset();
  last_time_ = PacketTime::State();
  for (Queue& q : queues_) q.begin = q.end = 0;
}

// pt_df_fetch: the packet at pos_ (decoded by the packet decoder, kept while pos_ stays).
// Inline for its usual cases: the packet fetched before, and the index's packet or PADs
// after the last one fetched; FetchLive does the rest.
[[gnu::always_inline]] inline int PacketQuery::Fetch() {
  if (next_pos_ == pos_) return next_ == Kind::kNone ? fetch_error_ : 0;
  if (index_ != nullptr) [[likely]] {
    // The packet at pos_ from the scan's index, if the index covers pos_: a packet there,
    // or PADs up to the next (the scan decoded every byte from the first PSB on).
    uint64_t pad_end = 0;
    switch (indexed_.Find(pos_, &cur_, &cur_value_, &pad_end)) {
      case PacketIndex::Reader::At::kPacket:
        next_pos_ = pos_;
        next_ = static_cast<Kind>(cur_->kind & PacketIndex::kKindMask);
        next_size_ = cur_->size;
        fetch_error_ = 0;
        return 0;
      case PacketIndex::Reader::At::kPad:
        next_pos_ = pos_;
        next_ = Kind::kPad;
        next_size_ = static_cast<int>(std::min<uint64_t>(pad_end - pos_, INT32_MAX));
        fetch_error_ = 0;
        return 0;
      case PacketIndex::Reader::At::kNone: break;  // before the first PSB, the end, or inside a packet
    }
  }
  return FetchLive();
}

int PacketQuery::FetchLive() {
  next_pos_ = pos_;
  next_ = Kind::kNone;
  if (pos_ >= size_) {
    fetch_error_ = pos_ == size_ ? -pte_eos : -pte_nosync;
    return fetch_error_;
  }
  if (packets_pos_ != pos_) {
    int status = pt_pkt_sync_set(packets_, pos_);
    if (status < 0) {
      packets_pos_ = UINT64_MAX;
      fetch_error_ = status;
      return status;
    }
  }
  pt_packet packet;
  int size = pt_pkt_next(packets_, &packet, sizeof packet);
  if (size < 0) {
    packets_pos_ = UINT64_MAX;
    fetch_error_ = size;
    return size;
  }
  packets_pos_ = pos_ + static_cast<uint64_t>(size);
  next_size_ = size;
  fetch_error_ = 0;
  const Packed packed = Pack(packet, pos_);
  live_ = PacketIndex::Record{0, packed.kind, packed.size, packed.aux, packed.bits};
  cur_ = &live_;
  cur_value_ = packed.value;
  next_ = static_cast<Kind>(packed.kind);
  return 0;
}

int PacketQuery::Start(uint64_t sync, uint64_t* ip, bool in_flight) {
  Reset();
  if (in_flight && calibrations_ != nullptr) {
    const PacketTime::Calibration* carried = calibrations_->At(sync, config_, *index_);
    if (carried != nullptr) time_.set_calibration(*carried);
  }
  synced_ = true;
  sync_ = sync;
  pos_ = sync;
  int status = Fetch();
  if (status != 0) return status;
  if (next_ != Kind::kPsb) return -pte_nosync;
  status = DecodePsb();
  if (status < 0) return status;
  // The start IP before reading ahead: an adjacent PSB+ may change it.
  if (ip != nullptr && ip_.Query(ip) == 0) ip = nullptr;
  status = ReadAhead();
  if (status < 0) return status;
  int flags = StatusFlags();
  if (ip_.Query(ip) < 0 && ip != nullptr) flags |= pts_ip_suppressed;
  return flags;
}

int PacketQuery::SyncForward(uint64_t* ip) {
  // pt_qry_sync_forward's search start: from pos (past the PSB it synced on), less 15
  // bytes for a PSB a packet partly consumed. The packet decoder's sync_forward does the
  // same from its own (pos, sync); set them so its start is ours.
  uint64_t from = synced_ ? pos_ : 0;
  if (synced_ && pos_ == sync_) from += kPsbSize;
  const uint64_t start = from - std::min<uint64_t>(from, kPsbSize - 1);
  pt_packet_decoder* searcher = scan_;
  pt_packet_decoder* fresh = nullptr;
  if (start == 0) {
    // A fresh decoder searches from the beginning.
    fresh = NewPacketDecoder(config_);
    if (fresh == nullptr) return -pte_nomem;
    searcher = fresh;
  } else {
    // sync_set(q) then sync_forward searches from q + 16 - 15.
    int status = pt_pkt_sync_set(searcher, start - 1);
    if (status < 0) return status;
  }
  int status = pt_pkt_sync_forward(searcher);
  uint64_t found = 0;
  if (status >= 0) pt_pkt_get_sync_offset(searcher, &found);
  if (fresh != nullptr) pt_pkt_free_decoder(fresh);
  if (status < 0) return status;
  return Start(found, ip);
}

int PacketQuery::SyncSet(uint64_t* ip, uint64_t offset) { return SyncAt(ip, offset, /*in_flight=*/false); }
int PacketQuery::SyncContinue(uint64_t* ip, uint64_t offset) { return SyncAt(ip, offset, /*in_flight=*/true); }

const PacketTime::Calibration* PacketQuery::PsbCalibrations::At(uint64_t psb, const pt_config& config,
                                                                const PacketIndex& packets) {
  std::call_once(once_, [&] { Fold(config, packets); });
  auto at = std::lower_bound(at_psbs_.begin(), at_psbs_.end(), psb,
                             [](const auto& entry, uint64_t offset) { return entry.first < offset; });
  return at != at_psbs_.end() && at->first == psb ? &at->second : nullptr;
}

// The calibration's part of what the query does with each packet, in stream order: the
// header's TSC and CBR between a PSB and its PSBEND (or an OVF), the others as anywhere.
void PacketQuery::PsbCalibrations::Fold(const pt_config& config, const PacketIndex& packets) {
  PacketTime time(config);
  bool in_header = false;
  packets.ForEachPacket([&](const IndexedPacket& p) {
    switch (static_cast<Kind>(p.kind)) {
      case Kind::kPsb:
        at_psbs_.emplace_back(p.offset, time.calibration());
        time.OnPsb();
        in_header = true;
        break;
      case Kind::kPsbend: in_header = false; break;
      case Kind::kOvf: {
        in_header = false;
        const PacketTime::State state = time.state();
        time.Reset();
        time.set_state(state);
        break;
      }
      case Kind::kTsc:
        if (in_header) {
          time.OnHeaderTsc(p.value);
        } else {
          time.OnTsc(p.value);
        }
        break;
      case Kind::kCbr:
        if (in_header) {
          time.OnHeaderCbr(p.aux);
        } else {
          time.OnCbr(p.aux);
        }
        break;
      case Kind::kTma: time.OnTma(static_cast<uint32_t>(p.value & 0xffff), p.value >> 16); break;
      case Kind::kMtc: time.OnMtc(p.aux); break;
      case Kind::kCyc: time.OnCyc(p.value); break;
      default: break;
    }
  });
}

int PacketQuery::SyncAt(uint64_t* ip, uint64_t offset, bool in_flight) {
  // pt_sync_set: a PSB must start at `offset`.
  if (offset > size_) return -pte_eos;
  if (size_ < offset + 2) return -pte_eos;
  const uint8_t* at = config_.begin + offset;
  if (at[0] != 0x02 || at[1] != 0x82) return -pte_nosync;
  int status = pt_pkt_sync_set(scan_, offset);
  if (status < 0) return status;
  pt_packet packet;
  status = pt_pkt_next(scan_, &packet, sizeof packet);
  if (status < 0) return status;
  return Start(offset, ip, in_flight);
}

// --- Read-ahead and status ---------------------------------------------------------

// One test of a mask for most packets (this runs for every packet read ahead).
// Inline in Event (the event path reads ahead after every event).
[[gnu::always_inline]] inline int PacketQuery::ReadAheadInline() {
  while (true) {
    int status = Fetch();
    if (status != 0) return status;
    if (next_ == Kind::kTip || next_ == Kind::kTnt) return 0;
    if (WillEvent()) return 0;
    if (next_ == Kind::kTsc) {
      DecodeTsc();  // Decode's case, without its call: every syscall's re-enable has one
      continue;
    }
    status = Decode();
    if (status != 0) {
      if (status == -pte_eos) {
        // A truncated status packet at the end.
        pos_ = size_;
        next_pos_ = pos_;
        next_ = Kind::kNone;
        fetch_error_ = -pte_eos;
      }
      return status;
    }
  }
}

int PacketQuery::ReadAhead() { return ReadAheadInline(); }

// The end of a query that consumed a packet: pt_qry's time is now that of the packets
// read so far, and it reads ahead to the next packet a query needs (the end of the
// buffer there is no error).
[[gnu::always_inline]] inline int PacketQuery::EndQuery() {
  last_time_ = time_.state();
  int status = ReadAheadInline();
  return status < 0 && status != -pte_eos ? status : 0;
}

// --- Queries -----------------------------------------------------------------------

int PacketQuery::CacheTnt() {
  while (true) {
    if (next_ == Kind::kNone) return fetch_error_ != 0 ? fetch_error_ : -pte_internal;
    if (WillEvent()) return -pte_bad_query;
    if (next_ == Kind::kTip) return -pte_bad_query;
    event_ = nullptr;
    const bool tnt = next_ == Kind::kTnt;
    int status = Decode();
    if (status != 0) return status;
    if (event_ != nullptr) return -pte_event_ignored;
    if (tnt) break;
    status = ReadAhead();
    if (status != 0) return status;
  }
  last_time_ = time_.state();
  int status = ReadAhead();
  if (status < 0 && status != -pte_eos) return status;
  return 0;
}

int PacketQuery::CondBranchRefill(int* taken) {
  int status = 0;
  if (next_ == Kind::kTnt && cur_->aux != 0) {
    // CacheTnt's usual case: the read-ahead stopped at a TNT, no event before it.
    tnt_ = cur_value_;
    tnt_index_ = 1ull << (cur_->aux - 1);
    Consume();
    last_time_ = time_.state();
    status = ReadAhead();
    if (status < 0 && status != -pte_eos) return status;
    status = 0;
  } else {
    status = CacheTnt();
  }
  if (status < 0) return status;
  if (tnt_index_ == 0) return -pte_bad_query;
  *taken = (tnt_ & tnt_index_) != 0;
  tnt_index_ >>= 1;
  return StatusFlags();
}

int PacketQuery::IndirectBranch(uint64_t* addr) {
  int flags = 0;
  while (true) {
    if (next_ == Kind::kNone) return fetch_error_ != 0 ? fetch_error_ : -pte_internal;
    if (WillEvent()) return -pte_bad_query;
    event_ = nullptr;
    const Kind kind = next_;
    if (kind == Kind::kTnt && tnt_index_ != 0) return -pte_bad_query;
    int status = Decode();
    if (status != 0) return status;
    if (event_ != nullptr) return -pte_event_ignored;
    if (kind == Kind::kTip) {
      uint64_t ip = 0;
      if (ip_.Query(&ip) < 0) {
        flags |= pts_ip_suppressed;
      } else {
        *addr = ip;
      }
      break;
    }
    status = ReadAhead();
    if (status != 0) return status;
  }
  int status = EndQuery();
  if (status < 0) return status;
  return flags | StatusFlags();
}

// --- Packets in the stream ---------------------------------------------------------

// pt_qry_decode_psb with pt_qry_read_psb_header.
int PacketQuery::DecodePsb() {
  const uint64_t psb = pos_;
  time_.OnPsb();
  Consume();
  ip_ = LastIp();
  int status = 0;
  while (true) {
    status = Fetch();
    if (status != 0) break;
    // An OVF ends the header as PSBEND does (both carry pt_qry's psbend flag).
    if (next_ == Kind::kPsbend || next_ == Kind::kOvf) return 0;
    status = DecodeHeader();
    if (status != 0) break;
  }
  pos_ = psb;
  queues_[kBindPsbend].begin = queues_[kBindPsbend].end = 0;
  Fetch();
  return status;
}

int PacketQuery::DecodeHeader() {
  switch (next_) {
    case Kind::kPad: Consume(); return 0;
    case Kind::kFup: return HeaderFup();
    case Kind::kMode: return HeaderMode();
    case Kind::kTsc: return HeaderTsc();
    case Kind::kCbr: return HeaderCbr();
    case Kind::kTma: return DecodeTma();
    case Kind::kMtc: return DecodeMtc();
    case Kind::kCyc: return DecodeCyc();
    case Kind::kPip: {
      pt_event* ev = queues_[kBindPsbend].Enqueue();
      if (ev == nullptr) return -pte_nomem;
      ev->type = ptev_async_paging;
      ev->variant.async_paging.cr3 = cur_value_;
      ev->variant.async_paging.non_root = (cur_->aux & 1);
      Consume();
      return 0;
    }
    case Kind::kVmcs: {
      pt_event* ev = queues_[kBindPsbend].Enqueue();
      if (ev == nullptr) return -pte_nomem;
      ev->type = ptev_async_vmcs;
      ev->variant.async_vmcs.base = cur_value_;
      Consume();
      return 0;
    }
    case Kind::kMnt: {
      pt_event* ev = queues_[kBindPsbend].Enqueue();
      if (ev == nullptr) return -pte_nomem;
      ev->type = ptev_mnt;
      ev->variant.mnt.payload = cur_value_;
      Consume();
      return 0;
    }
    default: return -pte_bad_context;
  }
}

// The start of TIP, TIP.PGD and FUP: the last IP updated, the first event bound to the
// packet taken from its queue (null if none).
[[gnu::always_inline]] inline int PacketQuery::UpdateIp(Binding binding, pt_event** ev) {
  int status = ip_.Update(cur_->aux, cur_value_);
  if (status < 0) return status;
  *ev = queues_[binding].Dequeue();
  return 0;
}

// `ev`, bound to the current packet, is the next event. True when the packet is to be
// consumed now: no other event is bound to it and the event asked for that
// (consume_packet_, as libipt's decoder->consume_packet).
[[gnu::always_inline]] inline bool PacketQuery::TakeBoundEvent(pt_event* ev, Binding binding) {
  event_ = ev;
  if (queues_[binding].pending() || !consume_packet_) return false;
  consume_packet_ = false;
  return true;
}

[[gnu::always_inline]] inline int PacketQuery::DecodeTip() {
  pt_event* ev = nullptr;
  int status = UpdateIp(kBindTip, &ev);
  if (status < 0) return status;
  if (ev != nullptr) {
    switch (ev->type) {
      case ptev_async_branch:
        consume_packet_ = true;
        EventIp(&ev->variant.async_branch.to, ev);
        break;
      case ptev_async_paging: EventIp(&ev->variant.async_paging.ip, ev); break;
      case ptev_async_vmcs: EventIp(&ev->variant.async_vmcs.ip, ev); break;
      case ptev_exec_mode: EventIp(&ev->variant.exec_mode.ip, ev); break;
      default: return -pte_bad_context;
    }
    if (!TakeBoundEvent(ev, kBindTip)) return 0;
  }
  Consume();
  return 0;
}

[[gnu::always_inline]] inline int PacketQuery::DecodeTnt() {
  if (tnt_index_ != 0) return -pte_bad_context;
  const uint8_t bits = cur_->aux;
  if (bits == 0) return -pte_bad_packet;
  tnt_ = cur_value_;
  tnt_index_ = 1ull << (bits - 1);
  Consume();
  return 0;
}

[[gnu::always_inline]] inline int PacketQuery::DecodePge() {
  int status = ip_.Update(cur_->aux, cur_value_);
  if (status < 0) return status;
  pt_event* ev = nullptr;
  if (!consume_packet_) {
    ev = Standalone();
    ev->type = ptev_enabled;
    if (ip_.Query(&ev->variant.enabled.ip) < 0) return -pte_bad_packet;
    time_.state().Stamp(ev);
    tnt_ = 0;
    tnt_index_ = 0;
    consume_packet_ = true;
    enabled_ = true;
  } else {
    ev = queues_[kBindTip].Dequeue();
    if (ev != nullptr) {
      if (ev->type != ptev_exec_mode) return -pte_bad_context;
      EventIp(&ev->variant.exec_mode.ip, ev);
    }
  }
  if (ev == nullptr) return -pte_internal;
  event_ = ev;
  if (queues_[kBindTip].pending()) return 0;
  if (!consume_packet_) return -pte_internal;
  consume_packet_ = false;
  Consume();
  return 0;
}

[[gnu::always_inline]] inline int PacketQuery::DecodePgd() {
  pt_event* ev = nullptr;
  int status = UpdateIp(kBindTip, &ev);
  if (status < 0) return status;
  if (ev != nullptr) {
    switch (ev->type) {
      case ptev_async_branch: {
        const uint64_t at = ev->variant.async_branch.from;
        ev->type = ptev_async_disabled;
        ev->variant.async_disabled.at = at;
        EventIp(&ev->variant.async_disabled.ip, ev);
        break;
      }
      case ptev_async_paging:
      case ptev_async_vmcs:
      case ptev_exec_mode: ev->ip_suppressed = 1; break;
      default: return -pte_bad_context;
    }
  } else {
    ev = Standalone();
    ev->type = ptev_disabled;
    EventIp(&ev->variant.disabled.ip, ev);
    time_.state().Stamp(ev);
  }
  event_ = ev;
  if (queues_[kBindTip].pending()) return 0;
  enabled_ = false;
  Consume();
  return 0;
}

int PacketQuery::DecodeFup() {
  pt_event* ev = nullptr;
  int status = UpdateIp(kBindFup, &ev);
  if (status < 0) return status;
  if (ev != nullptr) {
    switch (ev->type) {
      case ptev_overflow:
        consume_packet_ = true;
        status = ip_.Query(&ev->variant.overflow.ip);
        if (status < 0) return status;
        break;
      case ptev_tsx:
        if (!ev->variant.tsx.aborted) consume_packet_ = true;
        EventIp(&ev->variant.tsx.ip, ev);
        break;
      case ptev_exstop:
        consume_packet_ = true;
        EventIp(&ev->variant.exstop.ip, ev);
        break;
      case ptev_mwait:
        consume_packet_ = true;
        EventIp(&ev->variant.mwait.ip, ev);
        break;
      case ptev_ptwrite:
        consume_packet_ = true;
        EventIp(&ev->variant.ptwrite.ip, ev);
        break;
      default: return -pte_internal;
    }
    if (!TakeBoundEvent(ev, kBindFup)) return 0;
  } else {
    uint64_t ip = 0;
    status = ip_.Query(&ip);
    if (status < 0) return status;
    ev = queues_[kBindTip].Enqueue();
    if (ev == nullptr) return -pte_nomem;
    ev->type = ptev_async_branch;
    ev->variant.async_branch.from = ip;
    time_.state().Stamp(ev);
  }
  Consume();
  return 0;
}

// pt_qry_header_fup, with the BDM70 erratum: a FUP in PSB+ while tracing is disabled
// that a TIP.PGE follows is not applied.
int PacketQuery::HeaderFup() {
  if (config_.errata.bdm70 && !enabled_) {
    int status = CheckBdm70(pos_ + static_cast<uint64_t>(next_size_));
    if (status < 0) return status;
    if (status > 0) {
      Consume();
      return 0;
    }
  }
  int status = ip_.Update(cur_->aux, cur_value_);
  if (status < 0) return status;
  if (cur_->aux != pt_ipc_suppressed) enabled_ = true;
  Consume();
  return 0;
}

int PacketQuery::CheckBdm70(uint64_t offset) {
  int status = pt_pkt_sync_set(scan_, offset);
  if (status < 0) return status;
  while (true) {
    pt_packet packet;
    status = pt_pkt_next(scan_, &packet, sizeof packet);
    if (status < 0) return status == -pte_eos ? 0 : status;
    switch (packet.type) {
      case ppt_tip_pge: return 1;
      case ppt_pad:
      case ppt_tsc:
      case ppt_cbr:
      case ppt_psbend:
      case ppt_pip:
      case ppt_mode:
      case ppt_vmcs:
      case ppt_tma:
      case ppt_mtc:
      case ppt_cyc:
      case ppt_mnt: continue;
      default: return 0;
    }
  }
}

int PacketQuery::ProcessPendingPsbEvents() {
  pt_event* ev = queues_[kBindPsbend].Dequeue();
  if (ev == nullptr) return 0;
  ev->status_update = 1;
  time_.state().Stamp(ev);
  switch (ev->type) {
    case ptev_exec_mode: EventIp(&ev->variant.exec_mode.ip, ev); break;
    case ptev_tsx: EventIp(&ev->variant.tsx.ip, ev); break;
    case ptev_async_paging: EventIp(&ev->variant.async_paging.ip, ev); break;
    case ptev_async_vmcs: EventIp(&ev->variant.async_vmcs.ip, ev); break;
    case ptev_cbr: break;
    case ptev_mnt: ev->status_update = 0; break;  // maintenance: anywhere, no status
    default: return -pte_internal;
  }
  event_ = ev;
  return 1;
}

// The offset from pos_ to the end of the FUP an OVF binds to, 0 if none, or an error
// (pt_qry_find_ovf_fup).
int PacketQuery::FindOvfFup() {
  int status = pt_pkt_sync_set(scan_, pos_);
  if (status < 0) return status;
  while (true) {
    pt_packet packet;
    status = pt_pkt_next(scan_, &packet, sizeof packet);
    if (status < 0) return status;
    switch (packet.type) {
      case ppt_fup: {
        uint64_t end = 0;
        pt_pkt_get_offset(scan_, &end);
        if (end <= pos_) return -pte_overflow;
        return static_cast<int>(end - pos_);
      }
      case ppt_invalid: return -pte_bad_opc;
      case ppt_unknown:
      case ppt_pad:
      case ppt_mnt:
      case ppt_cbr:
      case ppt_tsc:
      case ppt_tma:
      case ppt_mtc:
      case ppt_cyc: continue;
      case ppt_psbend:
      case ppt_tip:
      case ppt_tip_pgd:
      case ppt_tnt_8:
      case ppt_tnt_64: return -pte_bad_context;
      default: return 0;
    }
  }
}

int PacketQuery::DecodeOvf() {
  int status = ProcessPendingPsbEvents();
  if (status < 0) return status;
  if (status > 0) return 0;
  const PacketTime::State time = time_.state();
  Reset();
  time_.set_state(time);
  pos_ += kOvfSize;
  const int offset = FindOvfFup();
  if (offset <= 0) {
    if (offset < 0 && offset != -pte_eos) return offset;
    pt_event* ev = Standalone();
    ev->type = ptev_overflow;
    ev->ip_suppressed = 1;
    enabled_ = false;
    event_ = ev;
    time_.state().Stamp(ev);
    return 0;
  }
  pt_event* ev = queues_[kBindFup].Enqueue();
  if (ev == nullptr) return -pte_internal;
  ev->type = ptev_overflow;
  enabled_ = true;
  time_.state().Stamp(ev);
  return 0;
}

[[gnu::always_inline]] inline int PacketQuery::DecodeMode() {
  if (cur_->aux == pt_mol_exec) {
    pt_event* ev = queues_[kBindTip].Enqueue();
    if (ev == nullptr) return -pte_nomem;
    ev->type = ptev_exec_mode;
    ev->variant.exec_mode.mode = ExecMode(cur_->bits);
    time_.state().Stamp(ev);
  } else if (cur_->aux == pt_mol_tsx) {
    pt_event* ev = nullptr;
    if (!enabled_) {
      ev = Standalone();
      ev->variant.tsx.ip = 0;
      ev->ip_suppressed = 1;
      event_ = ev;
    } else {
      ev = queues_[kBindFup].Enqueue();
      if (ev == nullptr) return -pte_nomem;
    }
    ev->type = ptev_tsx;
    ev->variant.tsx.speculative = cur_->bits & 1;
    ev->variant.tsx.aborted = (cur_->bits >> 1) & 1;
    time_.state().Stamp(ev);
  }
  Consume();
  return 0;
}

int PacketQuery::HeaderMode() {
  pt_event* ev = queues_[kBindPsbend].Enqueue();
  if (ev == nullptr) return -pte_nomem;
  if (cur_->aux == pt_mol_exec) {
    ev->type = ptev_exec_mode;
    ev->variant.exec_mode.mode = ExecMode(cur_->bits);
  } else if (cur_->aux == pt_mol_tsx) {
    ev->type = ptev_tsx;
    ev->variant.tsx.speculative = cur_->bits & 1;
    ev->variant.tsx.aborted = (cur_->bits >> 1) & 1;
  }
  Consume();
  return 0;
}

// A PIP binds to the TIP of an asynchronous branch (FUP) pending, else stands alone.
int PacketQuery::DecodePip() {
  pt_event* ev = nullptr;
  if (queues_[kBindTip].Find(ptev_async_branch) == nullptr) {
    ev = Standalone();
    ev->type = ptev_paging;
    ev->variant.paging.cr3 = cur_value_;
    ev->variant.paging.non_root = (cur_->aux & 1);
    event_ = ev;
  } else {
    ev = queues_[kBindTip].Enqueue();
    if (ev == nullptr) return -pte_nomem;
    ev->type = ptev_async_paging;
    ev->variant.async_paging.cr3 = cur_value_;
    ev->variant.async_paging.non_root = (cur_->aux & 1);
  }
  time_.state().Stamp(ev);
  Consume();
  return 0;
}

int PacketQuery::DecodeVmcs() {
  const uint64_t base = cur_value_;
  if (pt_event* paging = queues_[kBindTip].Find(ptev_async_paging); paging != nullptr) {
    // libipt 2.0.5 turns the paging event into the VMCS one and queues an empty
    // (zeroed) event behind it.
    if (queues_[kBindTip].Enqueue() == nullptr) return -pte_nomem;
    paging->type = ptev_async_vmcs;
    paging->variant.async_vmcs.base = base;
    Consume();
    return 0;
  }
  if (queues_[kBindTip].Find(ptev_async_branch) != nullptr) {
    pt_event* ev = queues_[kBindTip].Enqueue();
    if (ev == nullptr) return -pte_nomem;
    ev->type = ptev_async_vmcs;
    ev->variant.async_vmcs.base = base;
    Consume();
    return 0;
  }
  pt_event* ev = Standalone();
  ev->type = ptev_vmcs;
  ev->variant.vmcs.base = base;
  event_ = ev;
  time_.state().Stamp(ev);
  Consume();
  return 0;
}

// STOP and MNT are events of their own (MNT in PSB+ waits for PSBEND: DecodeHeader).
int PacketQuery::DecodeStop() {
  TimedStandalone(ptev_stop);
  Consume();
  return 0;
}

int PacketQuery::DecodeMnt() {
  TimedStandalone(ptev_mnt)->variant.mnt.payload = cur_value_;
  Consume();
  return 0;
}

// The power events (libipt gives them no time): EXSTOP with IP and MWAIT bind to a FUP,
// the rest stand alone. Queue failures are -pte_internal there.
int PacketQuery::DecodePower() {
  pt_event* ev = nullptr;
  if (next_ == Kind::kMwait || (next_ == Kind::kExstop && cur_->aux != 0)) {
    ev = queues_[kBindFup].Enqueue();
    if (ev == nullptr) return -pte_internal;
  } else {
    ev = Standalone();
    event_ = ev;
  }
  switch (next_) {
    case Kind::kExstop:
      ev->type = ptev_exstop;
      if (cur_->aux == 0) ev->ip_suppressed = 1;
      break;
    case Kind::kMwait:
      ev->type = ptev_mwait;
      ev->variant.mwait.hints = static_cast<uint32_t>(cur_value_);
      ev->variant.mwait.ext = static_cast<uint32_t>(cur_value_ >> 32);
      break;
    case Kind::kPwre:
      ev->type = ptev_pwre;
      ev->variant.pwre.state = cur_->aux;
      ev->variant.pwre.sub_state = cur_->bits;
      ev->variant.pwre.hw = cur_value_ & 1;
      break;
    default:
      ev->type = ptev_pwrx;
      ev->variant.pwrx.last = cur_->aux;
      ev->variant.pwrx.deepest = cur_->bits;
      ev->variant.pwrx.interrupt = cur_value_ & 1;
      ev->variant.pwrx.store = (cur_value_ >> 1) & 1;
      ev->variant.pwrx.autonomous = (cur_value_ >> 2) & 1;
      break;
  }
  Consume();
  return 0;
}

// PTWRITE: with IP it binds to a FUP, else stands alone (no time either).
int PacketQuery::DecodePtw() {
  const int size = pt_ptw_size(cur_->bits);
  if (size < 0) return size;
  pt_event* ev = nullptr;
  if (cur_->aux != 0) {
    ev = queues_[kBindFup].Enqueue();
    if (ev == nullptr) return -pte_internal;
  } else {
    ev = Standalone();
    ev->ip_suppressed = 1;
    event_ = ev;
  }
  ev->type = ptev_ptwrite;
  ev->variant.ptwrite.size = static_cast<uint8_t>(size);
  ev->variant.ptwrite.payload = cur_value_;
  Consume();
  return 0;
}

int PacketQuery::DecodePsbend() {
  int status = ProcessPendingPsbEvents();
  if (status < 0) return status;
  if (status > 0) return 0;
  pos_ += kPsbendSize;
  return 0;
}

// A CBR outside PSB+ restarts the calibration (PacketTime::OnCbr).
int PacketQuery::DecodeCbr() {
  int status = time_.OnCbr(cur_->aux);
  if (status < 0) return status;
  TimedStandalone(ptev_cbr)->variant.cbr.ratio = cur_->aux;
  Consume();
  return 0;
}

int PacketQuery::HeaderCbr() {
  int status = time_.OnHeaderCbr(cur_->aux);
  if (status < 0) return status;
  pt_event* ev = queues_[kBindPsbend].Enqueue();
  if (ev == nullptr) return -pte_nomem;
  ev->type = ptev_cbr;
  ev->variant.cbr.ratio = cur_->aux;
  Consume();
  return 0;
}

// --- Timing packets (PacketTime) ---------------------------------------------------
// Not inlined into Decode: there they would cost it a saved register for every packet.

int PacketQuery::HeaderTsc() {
  int status = time_.OnHeaderTsc(cur_value_);
  if (status < 0) return status;
  Consume();
  return 0;
}

// The index packs a TMA as ctc | fc << 16.
[[gnu::noinline]] int PacketQuery::DecodeTma() {
  int status = time_.OnTma(static_cast<uint32_t>(cur_value_ & 0xffff), cur_value_ >> 16);
  if (status < 0) return status;
  Consume();
  return 0;
}

[[gnu::noinline]] int PacketQuery::DecodeMtc() {
  int status = time_.OnMtc(cur_->aux);
  if (status < 0) return status;
  Consume();
  return 0;
}

[[gnu::noinline]] int PacketQuery::DecodeCyc() {
  int status = time_.OnCyc(cur_value_);
  if (status < 0) return status;
  Consume();
  return 0;
}

// One packet (after the functions of its kinds: the usual ones are inlined here; and
// this in Event).
[[gnu::always_inline]] inline int PacketQuery::DecodeInline() {
  switch (next_) {
    case Kind::kPad: Consume(); return 0;  // the index hands a run of PADs at once
    case Kind::kPsb: return DecodePsb();
    case Kind::kPsbend: return DecodePsbend();
    case Kind::kTip: return DecodeTip();
    case Kind::kTnt: return DecodeTnt();
    case Kind::kPge: return DecodePge();
    case Kind::kPgd: return DecodePgd();
    case Kind::kFup: return DecodeFup();
    case Kind::kOvf: return DecodeOvf();
    case Kind::kMode: return DecodeMode();
    case Kind::kTsc: DecodeTsc(); return 0;
    case Kind::kCbr: return DecodeCbr();
    case Kind::kPip: return DecodePip();
    case Kind::kVmcs: return DecodeVmcs();
    case Kind::kStop: return DecodeStop();
    case Kind::kMnt: return DecodeMnt();
    case Kind::kExstop:
    case Kind::kMwait:
    case Kind::kPwre:
    case Kind::kPwrx: return DecodePower();
    case Kind::kPtw: return DecodePtw();
    case Kind::kTma: return DecodeTma();
    case Kind::kMtc: return DecodeMtc();
    case Kind::kCyc: return DecodeCyc();
    default: return -pte_internal;  // Accepts keeps other packets away
  }
}

int PacketQuery::Decode() { return DecodeInline(); }

// After the packets' functions: it inlines the usual ones (three calls per syscall).
int PacketQuery::Event(pt_event* event, size_t size) {
  if (size < offsetof(pt_event, variant)) return -pte_invalid;
  if (tnt_index_ != 0) return -pte_bad_query;
  if (size > sizeof(pt_event)) size = sizeof(pt_event);
  while (true) {
    if (next_ == Kind::kNone) return fetch_error_ != 0 ? fetch_error_ : -pte_internal;
    if ((next_ == Kind::kTip || next_ == Kind::kTnt) && !WillEvent()) return -pte_bad_query;
    event_ = nullptr;
    int status = DecodeInline();
    if (status != 0) return status;
    if (event_ != nullptr) {
      if (size == sizeof(pt_event)) {
        *event = *event_;  // the usual size: a fixed copy, no memcpy call
      } else {
        std::memcpy(event, event_, size);
      }
      break;
    }
    status = ReadAheadInline();
    if (status != 0) return status;
  }
  int status = EndQuery();
  if (status < 0) return status;
  return StatusFlags();
}

}  // namespace ptd::decoder
