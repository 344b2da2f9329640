// PacketQuery's packets outside PSB+: the event each makes (pt_qry_decode_* and the
// event queues by binding), and Event, which reads them.

#include <cstring>

#include "decoder/packets/packet_query.h"
#include "decoder/packets/packet_query_inline.h"

namespace ptd::decoder {

namespace {

constexpr int kOvfSize = 2;     // ptps_ovf
constexpr int kPsbendSize = 2;  // ptps_psbend

}  // namespace

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

// The timing packets: their payloads to time_ (PacketTime). Not inlined into Decode:
// there they would cost it a saved register for every packet.

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
