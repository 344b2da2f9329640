#pragma once
// A query layer with libipt 2.0.5's pt_qry_* semantics, over libipt's packet decoder.
// The fast flow decoder asks it for every conditional branch, indirect branch and event;
// libipt's query decoder spends ~130 instructions per TNT bit and ~800 per event (a
// decoder function per packet, an event queue walk per status check). Here a TNT bit is
// a test and a shift of a cached word, and an event a few packets of a switch.
//
// Results are those of pt_qry for the streams it accepts: the same return codes (errors
// at the same call), status bits, pt_event fields, offsets, sync offsets and time. Packets
// come from pt_pkt_next; the state machine (read-ahead, event queues by binding, PSB+
// header, overflow) follows pt_query_decoder.c.
//
// Supported: PAD, PSB, PSBEND, FUP, TIP, TIP.PGE, TIP.PGD, TNT-8, TNT-64, MODE.Exec,
// MODE.TSX, TSC, TMA, MTC, CYC, OVF, CBR, PIP, VMCS, STOP, MNT, EXSTOP, MWAIT, PWRE,
// PWRX, PTW, and the BDM70 and SKL168 errata.
// Time follows pt_time.c and pt_tcal_* (PacketTime, decoder/packets/packet_time.h), so
// pt_qry_time and every event's tsc, lost_mtc and lost_cyc are libipt's.
// A buffer holding anything else (unknown packets), a packet libipt cannot decode (but
// for the end of the buffer), an OVF under the SKD010, APL11 or APL12 errata, a CYC the
// SKD007 erratum would drop, timing packets with an mtc_freq over 23 (libipt's shifts
// overflow), or a config with a decode callback is not accepted: the caller uses pt_qry
// for the whole buffer (Accepts decides, once per buffer).

#include <intel-pt.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "decoder/packets/cycle_index.h"
#include "decoder/packets/packet_index.h"
#include "decoder/packets/packet_time.h"
#include "decoder/packets/time_index.h"

namespace ptd::decoder {

class PacketQuery {
 public:
  // What a scan of a buffer's bytes found (Scan once per buffer, Accepts per config).
  // The packets libipt decoded in the scan, as the query layer needs them (PADs are left
  // out: the bytes between two packets of the scan are PADs).
  using Packed = IndexedPacket;
  // The index's chunks hold at most this many records each (a packet, or up to 255 bytes
  // of PADs between two).
  static constexpr uint64_t kIndexChunkPackets = uint64_t{1} << 16;
  struct Scan {
    bool supported = false;  // only supported packets, no decode error before the end
    bool has_ovf = false;
    bool has_timing = false;   // TMA, MTC or CYC (their arithmetic uses mtc_freq)
    bool has_skd007_cyc = false;  // a 2-byte CYC an OVF overlaps (SKD007 drops it)
    // The decode reads packets here instead of decoding each again (pt_pkt_next costs
    // ~150 instructions a packet). Null for buffers over kMaxIndexedBytes.
    std::shared_ptr<const PacketIndex> packets;
    // The buffer's CYC groups, from the same pass (the decode's cycles need them): null
    // unless `supported` (then the index's own pass, which resyncs past bad bytes, gives
    // them). Callers move it out.
    std::shared_ptr<CycleIndex> cycles;
    // The buffer's time index (TimeIndex: the time at each packet, the calibration at
    // each PSB that SyncContinue takes), folded from `packets` (or, without them, a walk
    // of the bytes) by the first that asks; shared by the copies of this scan. Null
    // unless `supported`.
    std::shared_ptr<SharedTimeIndex> times;
  };
  // `threads`: the chain from the first PSB is read in that many stretches at once
  // (buffers of kMinParallelScanBytes and more; the result is the same).
  // `chunk_packets`: the index's chunk size (tests make it small to cross many).
  static Scan ScanBytes(const pt_config& config, int threads = 1, uint64_t chunk_packets = kIndexChunkPackets);
  static constexpr uint64_t kMinParallelScanBytes = uint64_t{1} << 20;
  // The index takes 2 to 3 bytes per byte of PT: larger buffers are read packet by
  // packet with pt_pkt_next instead (slower, but the memory stays bounded).
  static constexpr uint64_t kMaxIndexedBytes = uint64_t{64} << 20;
  static bool Accepts(const pt_config& config, const Scan& scan);
  static bool Accepts(const pt_config& config) { return Accepts(config, ScanBytes(config)); }

  // `scan`: of config's bytes, or null (then every packet comes from pt_pkt_next).
  explicit PacketQuery(const pt_config& config, const Scan* scan = nullptr);
  ~PacketQuery();
  PacketQuery(const PacketQuery&) = delete;
  PacketQuery& operator=(const PacketQuery&) = delete;
  bool ok() const { return packets_ != nullptr; }
  // How many have been made in this process (tests check that the fast decoder used one).
  static uint64_t made() { return made_.load(std::memory_order_relaxed); }

  // As pt_qry_sync_forward, pt_qry_sync_set, pt_qry_get_offset, pt_qry_get_sync_offset,
  // pt_qry_cond_branch, pt_qry_indirect_branch, pt_qry_event and pt_qry_time.
  int SyncForward(uint64_t* ip);
  int SyncSet(uint64_t* ip, uint64_t offset);
  // SyncSet at a PSB that one query from the buffer's first PSB would pass in flight: the
  // CYC calibration is that query's there (TimeIndex::CalibrationAt), not started afresh.
  int SyncContinue(uint64_t* ip, uint64_t offset);
  int GetOffset(uint64_t* offset) const {
    if (!synced_) return -pte_nosync;
    *offset = pos_;
    return 0;
  }
  int GetSyncOffset(uint64_t* offset) const {
    if (!synced_) return -pte_nosync;
    *offset = sync_;
    return 0;
  }
  int CondBranch(int* taken) {
    if (tnt_index_ == 0) return CondBranchRefill(taken);
    *taken = (tnt_ & tnt_index_) != 0;
    tnt_index_ >>= 1;
    return tnt_index_ != 0 ? 0 : StatusFlags();
  }
  // CondBranch for a bit that is not its TNT packet's last: there CondBranch reads no
  // packet and returns 0. False (nothing taken) for the last bit or none.
  bool TakeInnerTntBit(int* taken) {
    if (tnt_index_ <= 1) return false;
    *taken = (tnt_ & tnt_index_) != 0;
    tnt_index_ >>= 1;
    return true;
  }
  // The bits of the TNT packet being read that CondBranch gives without reading a packet
  // or setting a status bit (it returns 0 for each): the inner ones (TakeInnerTntBit),
  // and the last one too when no event or end of trace follows the packet. At most
  // `max` (≤ 32), the first in the highest bit: how many.
  int PeekQuietTntBits(uint32_t* bits, int max) const {
    if (tnt_index_ == 0) return 0;
    const int top = std::bit_width(tnt_index_) - 1;  // the bits left, at positions top..0
    const int available = top + (StatusAfterTnt() == 0 ? 1 : 0);
    const int count = std::min(available, max);
    if (count <= 0) return 0;
    *bits = static_cast<uint32_t>((tnt_ >> (top - count + 1)) & ((uint64_t{1} << count) - 1));
    return count;
  }
  // Takes `count` of those bits at once.
  void SkipQuietTntBits(int count) { tnt_index_ >>= count; }
  int IndirectBranch(uint64_t* ip);
  int Event(pt_event* event, size_t size);
  int Time(uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) const {
    return last_time_.Query(tsc, lost_mtc, lost_cyc);
  }

 private:
  // A stretch of the packet chain from a PSB (ScanBytes).
  struct Chain {
    std::vector<PacketIndex::Chunk> chunks;  // PADs left out
    std::vector<uint64_t> psbs;   // its PSBs, in order
    bool ok = true;               // no undecodable or unmodelled packet
    bool met_stop = false;        // it reached its stop on a packet boundary
    bool has_ovf = false;
    bool has_timing = false;
    bool has_skd007_cyc = false;
    CycleIndex::Stretch cycles;
  };
  // `chunk_packets`: 0 for no index.
  static Chain ScanChain(const pt_config& config, uint64_t start, uint64_t stop, uint64_t chunk_packets,
                         const std::vector<uint64_t>* seen = nullptr);
  static void NoteFlags(const Chain& chain, Scan* scan);
  // The packet at pos_, by what pt_qry's decoder function flags say of it.
  using Kind = PacketKind;
  // libipt's event queue for one binding: 8 slots, at most 6 events.
  struct Queue {
    static constexpr uint8_t kSlots = 8;
    pt_event events[kSlots];
    uint8_t begin = 0;
    uint8_t end = 0;
    bool pending() const { return begin != end; }
    pt_event* Enqueue();
    pt_event* Dequeue();
    pt_event* Find(pt_event_type type);
  };
  enum Binding : uint8_t { kBindPsbend, kBindTip, kBindFup, kBindings };
  // Kinds as bits: those that are an event whenever they come next, and those that are
  // one when an event is queued for their binding (WillEvent).
  static constexpr uint32_t kEventKinds =
      1u << static_cast<uint8_t>(Kind::kPge) | 1u << static_cast<uint8_t>(Kind::kPgd) |
      1u << static_cast<uint8_t>(Kind::kOvf) | 1u << static_cast<uint8_t>(Kind::kMode) |
      1u << static_cast<uint8_t>(Kind::kCbr) | 1u << static_cast<uint8_t>(Kind::kPip) |
      1u << static_cast<uint8_t>(Kind::kVmcs) | 1u << static_cast<uint8_t>(Kind::kStop) |
      1u << static_cast<uint8_t>(Kind::kMnt) | 1u << static_cast<uint8_t>(Kind::kExstop) |
      1u << static_cast<uint8_t>(Kind::kMwait) | 1u << static_cast<uint8_t>(Kind::kPwre) |
      1u << static_cast<uint8_t>(Kind::kPwrx) | 1u << static_cast<uint8_t>(Kind::kPtw) |
      1u << static_cast<uint8_t>(Kind::kOther);
  static constexpr uint32_t kBindingKinds = 1u << static_cast<uint8_t>(Kind::kPsbend) |
                                            1u << static_cast<uint8_t>(Kind::kTip) |
                                            1u << static_cast<uint8_t>(Kind::kFup);
  struct LastIp {
    uint64_t ip = 0;
    bool have_ip = false;
    bool suppressed = false;
    int Query(uint64_t* out) const;
    int Update(uint8_t ipc, uint64_t packet_ip);
  };

  void Reset();
  // `in_flight`: SyncContinue's start (the calibration carried in).
  int SyncAt(uint64_t* ip, uint64_t offset, bool in_flight);
  int Start(uint64_t sync, uint64_t* ip, bool in_flight = false);
  int Fetch();
  int FetchLive();
  int ReadAhead();
  int ReadAheadInline();
  int EndQuery();
  bool WillEvent() const {
    const uint32_t bit = 1u << static_cast<uint8_t>(next_);
    if (bit & kEventKinds) return true;
    if (!(bit & kBindingKinds)) return false;
    const Binding binding = next_ == Kind::kPsbend ? kBindPsbend : next_ == Kind::kTip ? kBindTip : kBindFup;
    return queues_[binding].pending();
  }
  // The status bits of a query whose TNT bits ran out (the read-ahead packet decides).
  int StatusAfterTnt() const {
    int flags = 0;
    if (WillEvent()) flags |= pts_event_pending;
    if (next_ == Kind::kNone && fetch_error_ == -pte_eos) flags |= pts_eos;
    return flags;
  }
  int StatusFlags() const { return tnt_index_ != 0 ? 0 : StatusAfterTnt(); }
  int CondBranchRefill(int* taken);
  int CacheTnt();
  int Decode();
  int DecodeInline();
  int DecodeHeader();
  int DecodePsb();
  int UpdateIp(Binding binding, pt_event** ev);
  bool TakeBoundEvent(pt_event* ev, Binding binding);
  int DecodeTip();
  int DecodeTnt();
  int DecodePge();
  int DecodePgd();
  int DecodeFup();
  int HeaderFup();
  int DecodeOvf();
  int DecodeMode();
  int HeaderMode();
  int DecodePip();
  int DecodeVmcs();
  int DecodeStop();
  int DecodeMnt();
  int DecodePower();
  int DecodePtw();
  int DecodePsbend();
  int DecodeCbr();
  int HeaderCbr();
  int ProcessPendingPsbEvents();
  int EventIp(uint64_t* ip, pt_event* event) const;
  int FindOvfFup();
  int CheckBdm70(uint64_t offset);
  pt_event* Standalone();
  pt_event* TimedStandalone(pt_event_type type);
  void Consume() { pos_ += next_size_; }
  // The timing packets: their payloads to time_.
  void DecodeTsc() {
    time_.OnTsc(cur_value_);
    Consume();
  }
  int HeaderTsc();
  int DecodeTma();
  int DecodeMtc();
  int DecodeCyc();

  static std::atomic<uint64_t> made_;
  pt_config config_;
  uint64_t size_ = 0;  // config end - begin
  pt_packet_decoder* packets_ = nullptr;  // positioned at packets_pos_
  pt_packet_decoder* scan_ = nullptr;     // the look-ahead scans (OVF, BDM70)
  std::shared_ptr<const PacketIndex> index_;  // Scan::packets
  std::shared_ptr<SharedTimeIndex> times_;  // Scan::times
  PacketIndex::Reader indexed_{nullptr};       // of index_
  uint64_t packets_pos_ = UINT64_MAX;

  // pt_qry's state (its names).
  bool synced_ = false;
  uint64_t pos_ = 0;
  uint64_t sync_ = 0;
  Kind next_ = Kind::kNone;   // the packet at pos_ (kNone: fetch failed with fetch_error_)
  uint64_t next_pos_ = UINT64_MAX;  // where next_/packet_ were fetched
  int next_size_ = 0;
  int fetch_error_ = 0;
  // The packet at next_pos_ (in the index or live_), and its value.
  const PacketIndex::Record* cur_ = &live_;
  uint64_t cur_value_ = 0;
  PacketIndex::Record live_{};  // a packet pt_pkt_next decoded here (its value in cur_value_)
  uint64_t tnt_ = 0;
  uint64_t tnt_index_ = 0;
  LastIp ip_;
  PacketTime time_;
  PacketTime::State last_time_;  // time_ at the end of the last query (pt_qry_time)
  bool enabled_ = false;
  bool consume_packet_ = false;
  pt_event* event_ = nullptr;
  pt_event standalone_{};
  Queue queues_[kBindings];
};

}  // namespace ptd::decoder
