// PacketQuery reading a PSB+ header (pt_qry_decode_psb, pt_qry_read_psb_header, the
// header_* decoder functions) and the events it queues until PSBEND.

#include "decoder/packets/packet_query.h"
#include "decoder/packets/packet_query_inline.h"

namespace ptd::decoder {

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

int PacketQuery::HeaderTsc() {
  int status = time_.OnHeaderTsc(cur_value_);
  if (status < 0) return status;
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

}  // namespace ptd::decoder
