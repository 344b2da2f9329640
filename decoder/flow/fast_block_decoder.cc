#include "decoder/flow/fast_block_decoder.h"

#include <cstring>

#include "decoder/flow/flow_decoder.h"
#include "decoder/flow/libipt_insn_oracle.h"

namespace ptd::decoder {
namespace {

constexpr uint32_t kMaxEntryInsns = FastBlockCache::kMaxRunInstructions;

// The instruction at `ip` in libipt's classes (the project's one x86 decoder, Zydis 4:
// it decodes what libipt's own decoder does and capstone 4 did not, CET shadow-stack
// instructions in libgcc's unwinder, ptwrite); iclass ptic_error when it cannot be decoded.
FastInsn DecodeFastInsn(pt_exec_mode mode, uint64_t ip, const uint8_t* bytes, size_t size) {
  FastInsn insn;
  static_cast<image::X86Insn&>(insn) = image::DecodeX86(mode, ip, bytes, size);
  insn.ip = ip;
  return insn;
}

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

void FastBlockDecoder::ReturnStack::Push(uint64_t ip) {
  stack[top] = ip;
  top = top == kSize ? 0 : top + 1;
  if (bottom == top) bottom = bottom == kSize ? 0 : bottom + 1;
}

int FastBlockDecoder::ReturnStack::Pop(uint64_t* ip) {
  if (top == bottom) return -pte_retstack_empty;
  top = top == 0 ? kSize : top - 1;
  *ip = stack[top];
  return 0;
}

namespace {
// The block decoder gives its query decoder no flags of its own.
pt_config QueryConfig(const pt_config& config) {
  pt_config c = config;
  std::memset(&c.flags, 0, sizeof c.flags);
  return c;
}
}  // namespace

void FastBlockCache::FlushRuns() {
  if (run_sink_ == nullptr) return;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Entry& entry = blocks_.data()[i];
    if (entry.hits == 0) continue;
    run_sink_->OnBlocks(entry.ip, entry.last.ip, entry.ninsn, entry.hits);
    entry.hits = 0;
  }
}

FastBlockDecoder::FastBlockDecoder(const pt_config& config, FastBlockCache* cache, image::ProcessImage* image,
                                   const PacketQuery::Scan* packet_scan, SectionBlockCache* section_blocks)
    : query_(QueryConfig(config), packet_scan), cache_(cache), image_(image), section_blocks_(section_blocks) {}

FastBlockDecoder::~FastBlockDecoder() = default;

void FastBlockDecoder::Reset() {
  mode_ = ptem_unknown;
  ip_ = 0;
  status_ = 0;
  enabled_ = false;
  process_event_ = false;
  speculative_ = false;
  process_insn_ = false;
  bound_paging_ = false;
  bound_vmcs_ = false;
  bound_ptwrite_ = false;
  std::memset(&event_, 0, sizeof event_);
  retstack_ = ReturnStack();
  link_from_ = 0;
}

int FastBlockDecoder::Status(int flags) const {
  if (!enabled_) flags |= pts_ip_suppressed;
  if ((status_ & pts_eos) && !process_event_) flags |= pts_eos;
  return flags;
}

int FastBlockDecoder::Start(int status) {
  if (status < 0) return status;
  status_ = status;
  if (!(status & pts_ip_suppressed)) enabled_ = true;
  return ProceedTrailingEvent(nullptr);
}

int FastBlockDecoder::SyncForward() {
  Reset();
  return Start(query_.SyncForward(&ip_));
}

int FastBlockDecoder::SyncSet(uint64_t offset) {
  Reset();
  return Start(query_.SyncSet(&ip_, offset));
}

int FastBlockDecoder::SyncContinue(uint64_t offset) {
  Reset();
  return Start(query_.SyncContinue(&ip_, offset));
}

// Inline: it runs before and after every event (most of a syscall's cost is per event).
[[gnu::always_inline]] inline int FastBlockDecoder::FetchEvent() {
  if (process_event_) return 1;
  if (!(status_ & pts_event_pending)) return 0;
  int status = query_.Event(&event_, sizeof event_);
  if (status < 0) return status;
  process_event_ = true;
  status_ = status;
  return 1;
}

// Not cached per instruction: what the decode keeps are runs (Fill), and the event paths
// step through few instructions (~500 on the mruby sample, of 20,000 in its runs). A map
// of every instruction cost more in page faults and inserts than its hits saved (Fill
// decodes ~15% of its instructions a second time, for runs that start inside others).
int FastBlockDecoder::Decode(uint64_t ip, FastInsn* insn) {
  uint8_t bytes[pt_max_insn_size];
  size_t n = image_->ReadCode(ip, bytes, sizeof bytes);
  if (n == 0) return -pte_nomap;
  *insn = DecodeFastInsn(cache_->mode(), ip, bytes, n);
  // Zydis refuses some bytes libipt's length decoder accepts (and its block decoder walks
  // on over): then libipt says what they are. Rare.
  if (insn->iclass == ptic_error) DecodeInsnWithLibipt(cache_->mode(), ip, bytes, n, insn);
  return insn->iclass == ptic_error ? -pte_bad_insn : 0;
}

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

// libipt's pt_blk_proceed_with_trace (with pt_blk_next_ip): one step that needs trace.
int FastBlockDecoder::ProceedWithTrace(const FastInsn& insn) {
  int status = 0;
  switch (insn.iclass) {
    case ptic_cond_jump: {
      int taken = 0;
      status = query_.CondBranch(&taken);
      if (status < 0) return status;
      ip_ = taken ? insn.target : insn.ip + insn.size;
      status_ = status;
      return 0;
    }
    case ptic_return: {
      int taken = 0;
      status = query_.CondBranch(&taken);
      if (status >= 0) {
        if (!taken) return -pte_bad_retcomp;
        int err = retstack_.Pop(&ip_);
        if (err < 0) return err;
        status_ = status;
        return 0;
      }
      if (status != -pte_bad_query) return status;
      break;
    }
    case ptic_call:
    case ptic_jump:
      if (insn.direct) return -pte_internal;
      break;
    case ptic_far_call:
    case ptic_far_return:
    case ptic_far_jump: break;
    case ptic_error: return -pte_bad_insn;
    default: return -pte_internal;
  }
  status = query_.IndirectBranch(&ip_);
  if (status < 0) return status;
  status_ = status;
  if (status & pts_ip_suppressed) return -pte_noip;
  return 0;
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

[[gnu::always_inline]] inline FastBlockCache::Entry& FastBlockDecoder::Lookup(uint64_t ip) {
  if (const uint32_t* index = cache_->recent_.Find(ip)) [[likely]] {
    return cache_->blocks_[*index];
  }
  auto [it, inserted] = cache_->index_.try_emplace(ip, static_cast<uint32_t>(cache_->blocks_.size()));
  if (inserted) {
    cache_->blocks_.push_back(FastBlockCache::Entry{});
    cache_->blocks_.back().ip = ip;
    Fill(ip, &cache_->blocks_.back());
  }
  cache_->recent_.Put(ip, it->second);
  return cache_->blocks_[it->second];
}

// Lookup through the link the last block left (checked against the IP: the cache may have
// been cleared or the link filled for another run since), filling that link on a miss.
[[gnu::always_inline]] inline FastBlockCache::Entry& FastBlockDecoder::LookupLinked(uint64_t ip) {
  MappedArray<FastBlockCache::Entry>& blocks = cache_->blocks_;
  const uint32_t from = link_from_;
  link_from_ = 0;
  if (from == 0 || link_ip_ != ip || from > blocks.size()) return Lookup(ip);
  const uint32_t next = blocks[from - 1].next[link_slot_];
  if (next != 0 && next <= blocks.size() && blocks[next - 1].ip == ip) [[likely]] {
    return blocks[next - 1];
  }
  FastBlockCache::Entry& entry = Lookup(ip);  // may move the entries
  blocks[from - 1].next[link_slot_] = static_cast<uint32_t>(&entry - blocks.data()) + 1;
  return entry;
}

SectionBlocks* FastBlockDecoder::SharedRuns(const image::ProcessImage::SectionBytes& section) {
  if (section_blocks_ == nullptr) return nullptr;
  SharedSection& shared = shared_section_;
  const uint64_t size = section.end - section.start;
  if (shared.runs == nullptr || shared.module != section.module->get() || shared.file_offset != section.file_offset ||
      shared.size != size || shared.mode != cache_->mode()) {
    shared = {section_blocks_->Get(*section.module, section.file_offset, size, cache_->mode()), section.module->get(),
              section.file_offset, size, cache_->mode()};
  }
  return shared.runs;
}

void FastBlockDecoder::Fill(uint64_t ip, FastBlockCache::Entry* entry) {
  image::ProcessImage::SectionBytes section;
  if (!image_->SectionBytesAt(ip, &section)) {
    entry->error = -pte_nomap;
    return;
  }
  SectionBlocks* shared = SharedRuns(section);
  const uint64_t offset = ip - section.start;
  BlockSummary run;
  if (shared != nullptr && shared->Find(section.start, offset, &run)) {
    ++cache_->runs_shared_;
  } else {
    // Shared only if every instruction was read from this section's bytes alone: near its
    // end, Decode reads on into whatever the process maps next.
    bool section_bytes_only = true;
    uint64_t at = ip;
    while (true) {
      section_bytes_only &= section.end - at >= pt_max_insn_size;
      FastInsn insn;
      int status = Decode(at, &insn);
      if (status < 0) {
        run.error = status;
        break;
      }
      ++run.ninsn;
      run.last = insn;
      uint64_t next = insn.ip + insn.size;
      if (insn.iclass != ptic_other || next < section.start || next >= section.end || run.ninsn == kMaxEntryInsns) {
        break;
      }
      at = next;
    }
    ++cache_->runs_decoded_;
    if (shared != nullptr && section_bytes_only) shared->Add(section.start, offset, run);
  }
  entry->ninsn = run.ninsn;
  entry->error = run.error;
  entry->last = run.last;
}

// libipt's cached path: blocks end at every instruction that needs trace, at direct
// calls and jumps, and where the code runs out of its section. Each block leaves a link
// to the one that follows (LookupLinked).
// Inline: it runs once per block, from Next (saving a call's register spills).
[[gnu::always_inline]] inline int FastBlockDecoder::ProceedNoEvent(pt_block* block) {
  while (true) {
    FastBlockCache::Entry& entry = LookupLinked(ip_);
    if (entry.ninsn == 0) return entry.error;
    const bool fresh = !entry.ran;
    if (fresh) {
      entry.ran = true;
      entry.quick = entry.error == 0 && (entry.last.iclass == ptic_cond_jump ||
                                         (entry.last.iclass == ptic_jump && entry.last.direct));
      // (A call to the next instruction pushes nothing: Next takes it.)
      entry.crossing = entry.error == 0 && !entry.quick &&
                       ((entry.last.iclass == ptic_call &&
                         !(entry.last.direct && entry.last.target == entry.last.ip + entry.last.size)) ||
                        entry.last.iclass == ptic_return || (entry.last.iclass == ptic_jump && !entry.last.direct));
    }
    uint32_t ninsn = block->ninsn + entry.ninsn;
    if (ninsn > UINT16_MAX) return 0;
    block->ninsn = static_cast<uint16_t>(ninsn);
    const FastInsn& last = entry.last;
    block->end_ip = last.ip;
    block->iclass = last.iclass;
    block->size = last.size;
    const uint64_t fallthrough = last.ip + last.size;
    if (entry.error != 0) {
      ip_ = fallthrough;
      return entry.error;
    }
    const uint32_t self = static_cast<uint32_t>(&entry - cache_->blocks_.data()) + 1;
    auto leave = [&](uint8_t slot) {
      link_from_ = self;
      link_slot_ = slot;
      link_ip_ = ip_;
    };
    switch (last.iclass) {
      case ptic_cond_jump: {
        // ProceedWithTrace's first case, inline: most blocks of a loop end here.
        int taken = 0;
        int status = query_.CondBranch(&taken);
        if (status < 0) return status == -pte_noip && !fresh ? 0 : status;
        ip_ = taken ? last.target : fallthrough;
        status_ = status;
        leave(taken ? 1 : 0);
        return 0;
      }
      case ptic_other: {
        ip_ = fallthrough;
        leave(0);
        // A part of a long run continues in the same section: the same block.
        uint64_t start = 0, end = 0;
        if (entry.ninsn == kMaxEntryInsns && image_->SectionBounds(last.ip, &start, &end) && ip_ >= start &&
            ip_ < end) {
          continue;
        }
        return 0;
      }
      case ptic_call:
        if (last.direct) {
          if (last.target != fallthrough) retstack_.Push(fallthrough);
          ip_ = last.target;
          leave(0);
          return 0;
        }
        retstack_.Push(fallthrough);
        break;
      case ptic_jump:
        if (last.direct) {
          ip_ = last.target;
          leave(0);
          return 0;
        }
        break;
      default:
        break;
    }
    int status = ProceedWithTrace(last);
    if (status >= 0) {
      leave(0);  // an indirect transfer: the link predicts the last target
      return status;
    }
    // Only a block decoded for the first time checks the suppressed IP (libipt's cache
    // hits do not).
    if (status == -pte_noip && !fresh) return 0;
    return status;
  }
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

int FastBlockDecoder::Proceed(pt_block* block) {
  int status = FetchEvent();
  if (status != 0) {
    if (status < 0) return status;
    return ProceedEvent(block);
  }
  if (!enabled_) return (status_ & pts_eos) ? -pte_eos : -pte_no_enable;
  status = ProceedNoEvent(block);
  if (status < 0) return status;
  return ProceedTrailingEvent(block);
}

int FastBlockDecoder::Next(pt_block* block) {
  std::memset(block, 0, sizeof *block);
  block->ip = ip_;
  block->mode = mode_;
  block->speculative = speculative_ ? 1 : 0;
  block_section_ = 0;
  if (mode_ != cache_->mode() && mode_ != ptem_unknown) [[unlikely]] {
    cache_->SetMode(mode_);
  }
  // Proceed's common case, inline: no event to bind before or after the block.
  if (!process_event_ && !(status_ & pts_event_pending) && enabled_ && !process_insn_) [[likely]] {
    int status = ProceedNoEvent(block);
    if (status < 0) return status;
    if (!(status_ & pts_event_pending)) return Status(0);
    return ProceedTrailingEvent(block);
  }
  // Proceed's first case (an event fetched before, to bind now: a syscall's disable
  // takes two blocks this way), without its call.
  if (process_event_) return ProceedEvent(block);
  return Proceed(block);
}

int FastBlockDecoder::RunQuick(uint64_t offset, QuickRun* run) {
  run->blocks = 0;
  run->tracelet_blocks = 0;
  run->instructions = 0;
  if (!CanRunQuick()) return 0;
  if (mode_ != cache_->mode() && mode_ != ptem_unknown) return 0;
  // The function the jumps stay in: a crossed branch moves it.
  uint64_t lo = run->lo, hi = run->hi, span = hi > lo ? hi - lo : 0;
  const uint32_t max_blocks = run->max_blocks;
  const bool crossing = run->ranges != nullptr;
  uint64_t run_tsc = run->tsc;
  run->crossed_count = 0;
  run->ends_crossed = false;
  // The decoder's state is kept in locals while blocks are taken (no member loads and
  // stores per block) and written back when the run stops: where the next block
  // starts, and the link the last block leaves (LookupLinked fills it).
  uint64_t ip = ip_;
  uint32_t link_from = 0;
  uint8_t link_slot = 0;
  auto write_back = [&] {
    ip_ = ip;
    link_from_ = link_from;
    link_slot_ = link_slot;
    link_ip_ = ip;
  };
  uint32_t blocks = 0;
  uint32_t tracelet_blocks = 0;
  uint64_t instructions = 0;
  uint32_t last_index = 0;  // the last block taken, by index: a lookup may move the entries
  uint64_t last_ip = 0;
  uint64_t offset_before_last = offset;
  int result = 0;
  bool failed = false;
  // The tracelet being made: from the block whose entry and bits make `making_key`, at
  // the counts `blocks` and `instructions` had there, until `making_bits` quiet TNT bits
  // are taken.
  const bool tracelets = query_.uses_packet_query() && max_blocks > 1 && !cache_->counts_runs();
  const bool counting = cache_->counts_runs();
  std::vector<FastBlockCache::Tracelet>& made = cache_->tracelets_;
  if (tracelets && made.empty()) made.resize(size_t{1} << cache_->tracelet_slot_bits_);
  bool making = false;
  uint64_t making_key = 0;
  int making_bits = 0;
  int taken_bits = 0;
  uint32_t making_blocks = 0;
  uint64_t making_instructions = 0;
  auto finish = [&](uint32_t next, bool stop) {
    making = false;
    if (++cache_->tracelets_made_ > made.size() &&
        cache_->tracelet_slot_bits_ < FastBlockCache::kMaxTraceletSlotBits) {
      ++cache_->tracelet_slot_bits_;
      cache_->tracelets_made_ = 0;
      made.assign(size_t{1} << cache_->tracelet_slot_bits_, FastBlockCache::Tracelet());
    }
    made[cache_->TraceletSlot(making_key)] = {making_key, lo, hi, ip, last_ip, instructions - making_instructions, blocks - making_blocks, last_index, next,
                                                      static_cast<uint8_t>(taken_bits), link_slot, stop};
  };
  FastBlockCache::Entry* blocks_data = cache_->blocks_.data();
  FastBlockCache::Entry* entry = &LookupLinked(ip);
  blocks_data = cache_->blocks_.data();
  // A first run takes Next's path (it may check a suppressed IP), and so do blocks that
  // end in an instruction ProceedNoEvent treats otherwise (far transfers, ptwrite, ...).
  while (entry->quick || (crossing && entry->crossing)) {
    const FastInsn& last = entry->last;
    if (!entry->quick) {
      // A call, a return or an indirect jump to cross: no tracelet holds one (where it
      // goes is not in its bits).
      if (making) finish(static_cast<uint32_t>(entry - blocks_data) + 1, false);
      if (run->crossed_count == QuickRun::kMaxCrossed) break;
    }
    if (tracelets && last.iclass == ptic_cond_jump) {
      const uint32_t index = static_cast<uint32_t>(entry - blocks_data);
      if (making && taken_bits == making_bits) finish(index + 1, false);
      uint32_t bits = 0;
      const int count = making ? 0 : query_.PeekQuietTntBits(&bits, FastBlockCache::kTraceletBits);
      if (count > 0) {
        const uint64_t key = uint64_t{index} << 32 | uint64_t(count) << 24 | bits;
        const FastBlockCache::Tracelet& t = made[cache_->TraceletSlot(key)];
        if (t.key != key || t.lo != lo || t.hi != hi) {
          making = true;
          making_key = key;
          making_bits = count;
          taken_bits = 0;
          making_blocks = blocks;
          making_instructions = instructions;
        } else if (max_blocks - blocks > t.blocks) {
          query_.SkipQuietTntBits(t.bits);
          status_ = 0;  // what CondBranch returns for such bits
          blocks += t.blocks;
          tracelet_blocks += t.blocks;
          instructions += t.instructions;
          last_index = t.last_index;
          last_ip = t.last_ip;
          offset_before_last = offset;
          ip = t.ip;
          link_from = t.last_index + 1;
          link_slot = t.last_slot;
          if (t.stop) break;
          entry = &blocks_data[t.next - 1];
          continue;
        }
      }
    }
    ++blocks;
    if (counting) ++entry->hits;
    instructions += entry->ninsn;
    last_index = static_cast<uint32_t>(entry - blocks_data);
    last_ip = ip;
    offset_before_last = offset;
    uint8_t slot = 0;
    bool read_packet = false;
    uint64_t new_tsc = 0;  // the time after this block, when its packets changed it
    if (last.iclass == ptic_cond_jump) {
      int taken = 0;
      if (making) ++taken_bits;  // a bit of the packet the tracelet reads (maybe its last)
      if (query_.TakeInnerTntBit(&taken)) {
        status_ = 0;  // what CondBranch returns for such a bit
      } else {
        // The packet's last bit, or a new packet: the query may read packets.
        int status = query_.CondBranch(&taken);
        if (status < 0) {
          // As ProceedNoEvent for a run decoded before: no IP is not an error there, and
          // the block ends where it is (ip and the link stay those before it).
          write_back();
          result = status == -pte_noip ? Status(0) : status;
          failed = true;
          break;
        }
        status_ = status;
        read_packet = true;
      }
      slot = taken ? 1 : 0;
      ip = taken ? last.target : last.ip + last.size;
    } else if (last.direct) {
      // A direct jump, or a direct call: as Next, it pushes its return address.
      if (last.iclass == ptic_call) retstack_.Push(last.ip + last.size);
      ip = last.target;
    } else if (uint32_t bit = 0; last.iclass == ptic_return && query_.PeekQuietTntBits(&bit, 1) == 1 && bit == 1 &&
                                 !retstack_.empty()) {
      // A compressed return whose bit the query gives without reading a packet (as Next's
      // CondBranch would): the address the stack holds.
      query_.SkipQuietTntBits(1);
      status_ = 0;  // what CondBranch returns for such a bit
      retstack_.Pop(&ip);
    } else {
      // Any other return, an indirect call or jump: as Next, with the query
      // (ProceedWithTrace sets ip_ and status_).
      if (last.iclass == ptic_call) retstack_.Push(last.ip + last.size);
      const int status = ProceedWithTrace(last);
      if (status < 0) {
        // As ProceedNoEvent: the block ends here, ip_ where ProceedWithTrace left it,
        // and no IP is no error for a run decoded before.
        link_from_ = 0;
        result = status == -pte_noip ? Status(0) : status;
        failed = true;
        break;
      }
      ip = ip_;
      read_packet = true;
    }
    link_from = last_index + 1;
    link_slot = slot;
    if (read_packet) {
      if (status_ & pts_event_pending) {
        write_back();
        result = ProceedTrailingEvent(nullptr);
        failed = true;
        break;
      }
      uint64_t now = 0;
      if (query_.GetOffset(&now) < 0) break;
      if (now != offset) {
        // A packet was read: on the time axis the time may have changed with it, and the
        // caller's clock must see that after this block. (The other axes need no look:
        // instructions are counted, and cycles are looked up at the crossed branches'
        // offsets and at the run's end.)
        uint64_t tsc = 0;
        const bool timed =
            run->watch_time && (run->times != nullptr ? (tsc = run->times->At(now), true)
                                                      : query_.Time(&tsc, nullptr, nullptr) >= 0);
        if (timed && tsc != 0 && (run->times != nullptr ? tsc > run_tsc : tsc != run_tsc)) {
          if (!crossing || run->crossed_count == QuickRun::kMaxCrossed) break;
          new_tsc = run_tsc = tsc;
        }
        offset = now;
      }
    }
    // Calls and returns make events; a jump does when it leaves the function: the run
    // ends with it, or crosses it too.
    bool crossed = last.iclass != ptic_cond_jump && last.iclass != ptic_jump;
    if (!crossed && (ip - lo >= span || last.ip - lo >= span)) {
      if (making) finish(0, true);
      if (!crossing || run->crossed_count == QuickRun::kMaxCrossed) break;
      crossed = true;
    }
    if (crossed || new_tsc != 0) {
      run->crossed[run->crossed_count++] = {last_ip, last.ip, ip, offset, instructions, new_tsc, last.iclass, last.size,
                                            crossed};
    }
    if (crossed) {
      // The jumps from here on stay in the function entered. In a PLT stub, code of no
      // known function or one with inlined calls (StaysInFunction) none is dropped: each
      // is crossed, and the replay's FlushPending makes its event as Next's would.
      const image::FunctionRange& range = run->ranges->At(*image_, ip);
      const bool drops = range.mapped && !range.plt && !range.inlines;
      lo = drops ? range.start : 0;
      hi = drops ? range.end : 0;
      span = hi > lo ? hi - lo : 0;
    }
    if (blocks == max_blocks) break;  // a tracelet being made is dropped: it depends on the caller
    // The next block through the link this one keeps (as LookupLinked, without its checks:
    // the links of live entries point at live entries).
    const uint32_t next = entry->next[slot];
    if (next != 0 && blocks_data[next - 1].ip == ip) [[likely]] {
      entry = &blocks_data[next - 1];
    } else {
      write_back();
      entry = &LookupLinked(ip);
      blocks_data = cache_->blocks_.data();
      link_from = 0;  // LookupLinked used it
    }
  }
  // Stopped before a block that is not quick: the tracelet ends there.
  if (making && !entry->quick) finish(static_cast<uint32_t>(entry - blocks_data) + 1, false);
  if (!failed) {
    write_back();
    if (blocks > 0) result = Status(0);
  }
  run->blocks = blocks;
  run->tracelet_blocks = tracelet_blocks;
  run->instructions = instructions;
  if (blocks > 0) {
    const FastInsn& last = blocks_data[last_index].last;
    run->last_ip = last_ip;
    run->last_end_ip = last.ip;
    run->last_ninsn = blocks_data[last_index].ninsn;
    run->last_class = last.iclass;
    run->last_size = last.size;
    run->offset_before_last = offset_before_last;
    run->ends_crossed = run->crossed_count > 0 && run->crossed[run->crossed_count - 1].instructions == instructions;
  }
  return result;
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
