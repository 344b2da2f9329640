#pragma once
// FastBlockDecoder's steps that every part of it takes once per block (the no-event path,
// the event paths, RunQuick), inline in each of its files: a call each would cost more
// than the step (the block cache's lookups, the return stack, the status bits, fetching
// an event). Private to fast_block_*.cc.

#include <intel-pt.h>

#include <cstdint>

#include "decoder/flow/fast_block_decoder.h"

namespace ptd::decoder {

inline void FastBlockDecoder::ReturnStack::Push(uint64_t ip) {
  stack[top] = ip;
  top = top == kSize ? 0 : top + 1;
  if (bottom == top) bottom = bottom == kSize ? 0 : bottom + 1;
}

inline int FastBlockDecoder::ReturnStack::Pop(uint64_t* ip) {
  if (top == bottom) return -pte_retstack_empty;
  top = top == 0 ? kSize : top - 1;
  *ip = stack[top];
  return 0;
}

inline int FastBlockDecoder::Status(int flags) const {
  if (!enabled_) flags |= pts_ip_suppressed;
  if ((status_ & pts_eos) && !process_event_) flags |= pts_eos;
  return flags;
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

}  // namespace ptd::decoder
