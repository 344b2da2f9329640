// PacketQuery's query core: construction, sync, fetching packets (from the index or
// live), reading ahead, and the branch queries (pt_qry_cond_branch, pt_qry_indirect_branch).

#include "decoder/packets/packet_query.h"

#include <algorithm>

#include "common/pt_psb.h"
#include "decoder/packets/packet_query_inline.h"
#include "decoder/packets/packet_scan.h"

namespace ptd::decoder {

std::atomic<uint64_t> PacketQuery::made_{0};

PacketQuery::PacketQuery(const pt_config& config, const Scan* scan) : config_(config), time_(config) {
  made_.fetch_add(1, std::memory_order_relaxed);
  config_.decode.callback = nullptr;
  config_.decode.context = nullptr;
  size_ = static_cast<uint64_t>(config.end - config.begin);
  if (scan != nullptr && scan->packets != nullptr && !scan->packets->empty()) {
    index_ = scan->packets;
    indexed_ = PacketIndex::Reader(index_.get());
  }
  if (scan != nullptr) times_ = scan->times;
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
  const Packed packed = PackPacket(packet, pos_);
  live_ = PacketIndex::Record{0, packed.kind, packed.size, packed.aux, packed.bits};
  cur_ = &live_;
  cur_value_ = packed.value;
  next_ = static_cast<Kind>(packed.kind);
  return 0;
}

int PacketQuery::Start(uint64_t sync, uint64_t* ip, bool in_flight) {
  Reset();
  if (in_flight && times_ != nullptr) {
    const PacketTime::Calibration* carried = times_->Get(config_).CalibrationAt(sync);
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

int PacketQuery::ReadAhead() { return ReadAheadInline(); }

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

}  // namespace ptd::decoder
