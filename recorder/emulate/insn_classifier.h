#pragma once
// Decodes x86-64 instructions with capstone into what Intel PT cares about (length and
// BranchKind, plus the target of direct branches), cached per address: a traced program
// executes the same few thousand instructions over and over. The cache is keyed by
// address only, so the owner must Invalidate() when code may change (exec, munmap/mmap).

#include <capstone/capstone.h>

#include <cstdint>

#include <unordered_map>
#include "absl/types/span.h"
#include "recorder/emulate/executed_insn.h"

namespace ptd {

struct InsnInfo {
  uint8_t size = 0;                     // 0: could not decode (kind kUnknown)
  BranchKind kind = BranchKind::kNone;
  uint64_t direct_target = 0;           // direct jumps, calls and conditional jumps
  bool is_syscall = false;              // syscall / sysenter (not int n)
};

class InsnClassifier {
 public:
  InsnClassifier();
  ~InsnClassifier();
  InsnClassifier(const InsnClassifier&) = delete;
  InsnClassifier& operator=(const InsnClassifier&) = delete;

  // The instruction at `ip`, decoded from `bytes` (up to 15 bytes starting at ip) on a
  // cache miss. An undecodable instruction yields size 0 and kind kUnknown.
  const InsnInfo& Classify(uint64_t ip, absl::Span<const uint8_t> bytes);
  // The cached entry, or nullptr.
  const InsnInfo* Find(uint64_t ip) const;
  // Decodes without touching the cache.
  InsnInfo Decode(uint64_t ip, absl::Span<const uint8_t> bytes) const;

  void Invalidate() { cache_.clear(); }
  uint64_t undecodable() const { return undecodable_; }
  size_t cached() const { return cache_.size(); }

 private:
  csh handle_ = 0;
  cs_insn* scratch_ = nullptr;
  std::unordered_map<uint64_t, InsnInfo> cache_;
  uint64_t undecodable_ = 0;
};

}  // namespace ptd
