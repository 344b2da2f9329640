// FastBlockDecoder's event paths: libipt's block decoder binding each event to the
// instruction it belongs to, stepping one instruction (or one cached run) at a time
// (pt_blk_proceed_event, pt_blk_proceed_trailing_event, pt_blk_event).
#include "decoder/flow/fast_block_decoder.h"
#include "decoder/flow/fast_block_decoder_inline.h"

namespace ptd::decoder {
namespace {

bool IsFarBranch(const FastInsn& insn) {
  return insn.iclass == ptic_far_call || insn.iclass == ptic_far_return || insn.iclass == ptic_far_jump;
}

// Binds a PIP to a CR3 write: never in user-space code.
bool ChangesCr3(const FastInsn&) { return false; }

// A PTW packet without an IP binds to the next PTWRITE instruction.
bool IsPtwrite(const FastInsn& insn) { return insn.iclass == ptic_ptwrite; }

// libipt's end_on_call / end_on_jump: a direct call or jump ends the block.
bool EndsBlock(const FastInsn& insn) { return insn.iclass == ptic_call || insn.iclass == ptic_jump; }

// Where execution resumes after tracing was disabled at `insn` (libipt: the return
// address of calls, unknown otherwise).
uint64_t DisableResumeIp(const FastInsn& insn) {
  return insn.iclass == ptic_call || insn.iclass == ptic_far_call ? insn.ip + insn.size : 0;
}

}  // namespace

// libipt's pt_insn_next_ip: the next IP where no trace is needed.
int FastBlockDecoder::NextIp(const FastInsn& insn, uint64_t* ip) {
  switch (insn.iclass) {
    case ptic_other:
    case ptic_ptwrite: *ip = insn.ip + insn.size; return 0;
    case ptic_call:
    case ptic_jump:
      if (insn.direct) {
        *ip = insn.target;
        return 0;
      }
      return -pte_bad_query;
    case ptic_error: return -pte_bad_insn;
    default: return -pte_bad_query;
  }
}

[[gnu::always_inline]] inline int FastBlockDecoder::ProceedOneInsn(pt_block* block, FastInsn* insn,
                                                                   const FastInsn* known) {
  if (block->ninsn == UINT16_MAX) return 0;
  if (known != nullptr) {
    *insn = *known;
  } else {
    int status = Decode(ip_, insn);
    if (status < 0) return status;
  }
  if (ip_ < section_start_ || ip_ >= section_end_) {
    if (!image_->SectionBounds(ip_, &section_start_, &section_end_)) {
      section_start_ = 1;
      section_end_ = 0;
      return -pte_nomap;
    }
  }
  if (section_start_ != block_section_) {
    if (block->ninsn > 0) return 0;
    block_section_ = section_start_;
  }
  if (insn->iclass == ptic_call && !(insn->direct && insn->target == insn->ip + insn->size)) {
    retstack_.Push(insn->ip + insn->size);
  }
  block->iclass = insn->iclass;
  block->end_ip = insn->ip;
  block->size = insn->size;
  ++block->ninsn;
  return 1;
}

// The event paths step one instruction at a time; the straight-line instructions before
// a cached run's last one need no look at all (no branch, no event IP among them, one
// section): they are added at once. Returns the instruction at ip_ when it is a cached
// run's last one (no second lookup by address), else null.
[[gnu::always_inline]] inline const FastInsn* FastBlockDecoder::SkipStraight(pt_block* block, uint64_t stop_ip) {
  const FastBlockCache::Entry& entry = Lookup(ip_);
  if (entry.ninsn == 0 || entry.error != 0) return nullptr;
  if (entry.ninsn == 1) return &entry.last;
  if (stop_ip > ip_ && stop_ip <= entry.last.ip) return nullptr;
  if (block->ninsn + entry.ninsn > UINT16_MAX) return nullptr;
  if (block->ninsn > 0 && block_section_ != section_start_) return nullptr;
  if (ip_ < section_start_ || ip_ >= section_end_) return nullptr;
  if (block->ninsn == 0) block_section_ = section_start_;
  block->ninsn = static_cast<uint16_t>(block->ninsn + entry.ninsn - 1);
  ip_ = entry.last.ip;  // the next step adds it (and sets the block's end and class)
  return &entry.last;
}

int FastBlockDecoder::ProceedToIp(pt_block* block, FastInsn* insn, uint64_t ip) {
  while (true) {
    if (ip_ == ip) return 1;
    const FastInsn* known = SkipStraight(block, ip);
    int status = ProceedOneInsn(block, insn, known);
    if (status <= 0) return status;
    status = NextIp(*insn, &ip_);
    if (status < 0) return status;
    if (EndsBlock(*insn)) return ip_ == ip ? 1 : 0;
  }
}

int FastBlockDecoder::ProceedToIpWithTrace(pt_block* block, uint64_t ip) {
  FastInsn insn;
  int status = ProceedToIp(block, &insn, ip);
  if (status != -pte_bad_query) return status;
  return ProceedWithTrace(insn);
}

// libipt's pt_blk_proceed_to_insn: on to the first instruction `stop` accepts; with none
// before the next instruction that needs trace, -pte_bad_query there.
// `Stop` is a template argument: each walk is its own loop, the test inline (a syscall's
// disable walks here with ChangesCr3, which is never true).
template <bool (*Stop)(const FastInsn&)>
int FastBlockDecoder::ProceedToInsn(pt_block* block, FastInsn* insn) {
  while (true) {
    const FastInsn* known = SkipStraight(block, 0);  // runs end at a PTWRITE too (Fill)
    int status = ProceedOneInsn(block, insn, known);
    if (status <= 0) return status;
    if (Stop(*insn)) return 1;
    status = NextIp(*insn, &ip_);
    if (status < 0) return status;
    if (EndsBlock(*insn)) return 0;
  }
}

int FastBlockDecoder::Postpone(const FastInsn& insn) {
  if (process_insn_) return -pte_internal;
  process_insn_ = true;
  insn_ = insn;
  return Status(pts_event_pending);
}

[[gnu::always_inline]] inline int FastBlockDecoder::ProceedPostponed() {
  if (!process_insn_) return 0;
  if (enabled_) {
    int status = NextIp(insn_, &ip_);
    if (status < 0) {
      if (status != -pte_bad_query) return status;
      status = ProceedWithTrace(insn_);
      if (status < 0) return status;
    }
  }
  process_insn_ = bound_paging_ = bound_vmcs_ = bound_ptwrite_ = false;
  return 0;
}

int FastBlockDecoder::ProceedEvent(pt_block* block) {
  const pt_event& ev = event_;
  FastInsn insn;
  int status = 0;
  switch (ev.type) {
    case ptev_disabled:
      if (ev.ip_suppressed) {
        // Binds to the next CR3 write (none in user code): the walk ends at the
        // instruction that needs trace, the far branch that left.
        status = ProceedToInsn<ChangesCr3>(block, &insn);
      } else {
        status = ProceedToIp(block, &insn, ev.variant.disabled.ip);
      }
      if (status <= 0) {
        if (status != -pte_bad_query) return status;
        ip_ = DisableResumeIp(insn);
      }
      break;
    case ptev_async_disabled:
      status = ProceedToIp(block, &insn, ev.variant.async_disabled.at);
      if (status <= 0) return status;
      break;
    case ptev_async_branch:
      status = ProceedToIp(block, &insn, ev.variant.async_branch.from);
      if (status <= 0) return status;
      break;
    case ptev_paging:
    case ptev_vmcs:
      if (!enabled_) break;
      status = ProceedToInsn<IsFarBranch>(block, &insn);
      if (status <= 0) return status;
      if (ev.type == ptev_paging) {
        bound_paging_ = true;
      } else {
        bound_vmcs_ = true;
      }
      return Postpone(insn);
    case ptev_async_paging:
    case ptev_async_vmcs: {
      if (ev.ip_suppressed) break;
      uint64_t ip = ev.type == ptev_async_paging ? ev.variant.async_paging.ip : ev.variant.async_vmcs.ip;
      status = ProceedToIpWithTrace(block, ip);
      if (status < 0) return status;
      if (ip_ != ip) return 0;
      break;
    }
    case ptev_exec_mode:
      if (ev.ip_suppressed) break;
      status = ProceedToIpWithTrace(block, ev.variant.exec_mode.ip);
      if (status < 0) return status;
      if (ip_ != ev.variant.exec_mode.ip) return 0;
      break;
    case ptev_tsx:
      if (ev.ip_suppressed) break;
      status = ProceedToIp(block, &insn, ev.variant.tsx.ip);
      if (status <= 0) return status;
      break;
    case ptev_exstop:
    case ptev_mwait: {
      if (!enabled_ || ev.ip_suppressed) break;
      uint64_t ip = ev.type == ptev_exstop ? ev.variant.exstop.ip : ev.variant.mwait.ip;
      status = ProceedToIp(block, &insn, ip);
      if (status <= 0) return status;
      break;
    }
    case ptev_ptwrite:
      if (!enabled_) break;
      // libipt's pt_blk_proceed_to_ptwrite: on to the PTWRITE (the next one, or the one at
      // the event's IP), which is postponed with the event bound to it.
      if (ev.ip_suppressed) {
        status = ProceedToInsn<IsPtwrite>(block, &insn);
        if (status <= 0) return status;
        event_.variant.ptwrite.ip = insn.ip;  // the user learns where it was
        event_.ip_suppressed = 0;
      } else {
        status = ProceedToIp(block, &insn, ev.variant.ptwrite.ip);
        if (status <= 0) return status;
        status = ProceedOneInsn(block, &insn, nullptr);  // the PTWRITE itself
        if (status <= 0) return status;
      }
      bound_ptwrite_ = true;
      return Postpone(insn);
    default:  // enabled, overflow, stop, pwre, pwrx, tick, cbr, mnt: nothing to run first
      break;
  }
  return Status(pts_event_pending);
}

int FastBlockDecoder::ProceedTrailingEvent(pt_block* block) {
  (void)block;
  int status = FetchEvent();
  if (status <= 0) {
    if (status < 0) return status;
    status = ProceedPostponed();
    if (status < 0) return status;
    return Status(0);
  }
  const pt_event& ev = event_;
  switch (ev.type) {
    case ptev_disabled: {
      if (!process_insn_) break;
      status = NextIp(insn_, &ip_);
      if (status < 0) {
        if (status != -pte_bad_query) return status;
        ip_ = DisableResumeIp(insn_);
        return Status(pts_event_pending);
      }
      process_insn_ = bound_paging_ = bound_vmcs_ = bound_ptwrite_ = false;
      if (!ev.ip_suppressed && ip_ == ev.variant.disabled.ip) return Status(pts_event_pending);
      break;
    }
    case ptev_paging:
    case ptev_vmcs: {
      if (!enabled_) return Status(pts_event_pending);
      bool& bound = ev.type == ptev_paging ? bound_paging_ : bound_vmcs_;
      if (!process_insn_ || bound || !IsFarBranch(insn_)) break;
      bound = true;
      return Status(pts_event_pending);
    }
    case ptev_ptwrite:
      if (!enabled_) return Status(pts_event_pending);
      // One PTW binds to a postponed PTWRITE (without an IP of its own), at most one.
      if (!process_insn_ || bound_ptwrite_ || !ev.ip_suppressed || !IsPtwrite(insn_)) break;
      bound_ptwrite_ = true;
      return Status(pts_event_pending);
    default: {
      // Everything else binds after the postponed instruction (libipt runs it first;
      // that leaves none postponed).
      status = ProceedPostponed();
      if (status < 0) return status;
      bool pending = false;
      switch (ev.type) {
        case ptev_enabled:
        case ptev_overflow:
        case ptev_stop:
        case ptev_pwre:
        case ptev_pwrx:
        case ptev_tick:
        case ptev_cbr:
        case ptev_mnt: pending = true; break;
        case ptev_async_disabled: pending = ip_ == ev.variant.async_disabled.at; break;
        case ptev_async_branch: pending = ip_ == ev.variant.async_branch.from; break;
        case ptev_async_paging: pending = ev.ip_suppressed || ip_ == ev.variant.async_paging.ip; break;
        case ptev_async_vmcs: pending = ev.ip_suppressed || ip_ == ev.variant.async_vmcs.ip; break;
        case ptev_exec_mode: pending = ev.ip_suppressed || ip_ == ev.variant.exec_mode.ip; break;
        case ptev_tsx: pending = ev.ip_suppressed || ip_ == ev.variant.tsx.ip; break;
        case ptev_exstop: pending = ev.ip_suppressed || !enabled_ || ip_ == ev.variant.exstop.ip; break;
        case ptev_mwait: pending = ev.ip_suppressed || !enabled_ || ip_ == ev.variant.mwait.ip; break;
        default: break;
      }
      return Status(pending ? pts_event_pending : 0);
    }
  }
  status = ProceedPostponed();
  if (status < 0) return status;
  return Status(0);
}

int FastBlockDecoder::Event(pt_event* out) {
  if (!process_event_) return -pte_bad_query;
  pt_event& ev = event_;
  switch (ev.type) {
    case ptev_enabled:
      if (ev.variant.enabled.ip == ip_) ev.variant.enabled.resumed = 1;
      if (ev.status_update) return -pte_bad_context;
      if (ev.ip_suppressed) return -pte_noip;
      if (enabled_) return -pte_bad_context;
      ip_ = ev.variant.enabled.ip;
      enabled_ = true;
      break;
    case ptev_async_disabled:
      if (ip_ != ev.variant.async_disabled.at) return -pte_bad_query;
      [[fallthrough]];
    case ptev_disabled:
      if (ev.status_update || !enabled_) return -pte_bad_context;
      enabled_ = false;
      break;
    case ptev_async_branch:
      if (ip_ != ev.variant.async_branch.from) return -pte_bad_query;
      if (ev.status_update || !enabled_) return -pte_bad_context;
      ip_ = ev.variant.async_branch.to;
      break;
    case ptev_async_paging:
      if (!ev.ip_suppressed && ip_ != ev.variant.async_paging.ip) return -pte_bad_query;
      break;
    case ptev_async_vmcs:
      if (!ev.ip_suppressed && ip_ != ev.variant.async_vmcs.ip) return -pte_bad_query;
      break;
    case ptev_overflow:
      if (ev.status_update) return -pte_bad_context;
      enabled_ = !ev.ip_suppressed;
      ip_ = ev.ip_suppressed ? 0 : ev.variant.overflow.ip;
      speculative_ = false;
      break;
    case ptev_exec_mode:
      if (!ev.ip_suppressed && ip_ != ev.variant.exec_mode.ip) return -pte_bad_query;
      if (ev.status_update && enabled_ && mode_ != ptem_unknown && mode_ != ev.variant.exec_mode.mode) {
        return -pte_bad_status_update;
      }
      mode_ = ev.variant.exec_mode.mode;
      break;
    case ptev_tsx:
      if (!ev.ip_suppressed && ip_ != ev.variant.tsx.ip) return -pte_bad_query;
      speculative_ = ev.variant.tsx.speculative;
      break;
    case ptev_stop:
      if (ev.status_update || enabled_) return -pte_bad_context;
      break;
    case ptev_exstop:
      if (!ev.ip_suppressed && enabled_ && ip_ != ev.variant.exstop.ip) return -pte_bad_query;
      break;
    case ptev_mwait:
      if (!ev.ip_suppressed && enabled_ && ip_ != ev.variant.mwait.ip) return -pte_bad_query;
      break;
    default:  // paging, vmcs (one address space here), pwre, pwrx, ptwrite, tick, cbr, mnt
      break;
  }
  process_event_ = false;
  *out = ev;
  return ProceedTrailingEvent(nullptr);
}

}  // namespace ptd::decoder
