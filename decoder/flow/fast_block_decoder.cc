// FastBlockDecoder's API (sync, Next) and its no-event path, the cached runs most blocks
// take: libipt's pt_blk_* over the block cache (fast_block_decoder.h). The event paths
// are in fast_block_events.cc, RunQuick in fast_block_run_quick.cc, the cache's filling
// in fast_block_cache.cc.
#include <cstring>

#include "decoder/flow/fast_block_decoder.h"
#include "decoder/flow/fast_block_decoder_inline.h"

namespace ptd::decoder {

namespace {
// The block decoder gives its query decoder no flags of its own.
pt_config QueryConfig(const pt_config& config) {
  pt_config c = config;
  std::memset(&c.flags, 0, sizeof c.flags);
  return c;
}
}  // namespace

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
        if (entry.ninsn == FastBlockCache::kMaxRunInstructions && image_->SectionBounds(last.ip, &start, &end) &&
            ip_ >= start && ip_ < end) {
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

}  // namespace ptd::decoder
