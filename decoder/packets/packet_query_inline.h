#pragma once
// PacketQuery's hot paths that more than one of its files inlines (packet_query.cc, the
// query core; packet_query_events.cc, the packets' events; packet_query_psb.cc, the PSB+
// header): private to PacketQuery's files.

#include <intel-pt.h>

#include <algorithm>
#include <cstdint>

#include "decoder/packets/packet_query.h"

namespace ptd::decoder {

// MODE.Exec's bits (csl | csd << 1) as libipt reads them.
inline pt_exec_mode ExecMode(uint8_t bits) {
  pt_packet_mode_exec exec{};
  exec.csl = bits & 1;
  exec.csd = (bits >> 1) & 1;
  return pt_get_exec_mode(&exec);
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

// pt_qry_event_ip: a missing IP marks the event, it is no error.
[[gnu::always_inline]] inline int PacketQuery::EventIp(uint64_t* ip, pt_event* event) const {
  int status = ip_.Query(ip);
  if (status == -pte_noip || status == -pte_ip_suppressed) event->ip_suppressed = 1;
  return 0;
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

// The end of a query that consumed a packet: pt_qry's time is now that of the packets
// read so far, and it reads ahead to the next packet a query needs (the end of the
// buffer there is no error).
[[gnu::always_inline]] inline int PacketQuery::EndQuery() {
  last_time_ = time_.state();
  int status = ReadAheadInline();
  return status < 0 && status != -pte_eos ? status : 0;
}

}  // namespace ptd::decoder
