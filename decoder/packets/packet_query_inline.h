#pragma once
// PacketQuery's hot paths that more than one of its files inlines (packet_query.cc, the
// query core; packet_query_events.cc, the packets' events; packet_query_psb.cc, the PSB+
// header; packet_query_scan.cc, the scan): private to PacketQuery's files.

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
