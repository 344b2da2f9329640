#pragma once
// The one x86-64 instruction classifier: capstone decodes an instruction into what
// Intel PT cares about (length, BranchKind, the target of direct branches, which far
// transfer), cached per address: a traced program executes the same few thousand
// instructions over and over. The cache is keyed by address only, so the owner must
// Invalidate() when code may change (exec, munmap/mmap). The emulator generates packets
// from it; the decoder classifies the block ends libipt does not (Decode, no cache).

#include <capstone/capstone.h>

#include <cstdint>
#include <memory>

#include <unordered_map>

#include "absl/types/span.h"

namespace ptd::image {

enum class BranchKind : uint8_t {
  kNone,          // falls through; no packet
  kCondJump,      // jcc, jrcxz, loop*: one TNT bit
  kDirectJump,    // jmp rel: no packet
  kIndirectJump,  // jmp r/m: TIP
  kDirectCall,    // call rel: no packet; pushes the return address (unless to next insn)
  kIndirectCall,  // call r/m: TIP; pushes the return address
  kReturn,        // ret: taken TNT bit when compressed, TIP otherwise
  kFarTransfer,   // syscall, sysenter, int n, far jmp/call/ret, iret: leaves user space
  kUnknown,       // capstone could not decode it; treated as kNone, counted
};

// Which kFarTransfer, as libipt's ptic_far_call / ptic_far_return / ptic_far_jump.
enum class FarKind : uint8_t { kNone, kCall, kReturn, kJump };

struct InsnInfo {
  uint8_t size = 0;                     // 0: could not decode (kind kUnknown)
  BranchKind kind = BranchKind::kNone;
  FarKind far = FarKind::kNone;         // kFarTransfer only
  uint64_t direct_target = 0;           // direct jumps, calls and conditional jumps
  bool is_syscall = false;              // syscall / sysenter (not int n)
};

class InsnClassifier {
 public:
  InsnClassifier();

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
  // Capstone's handle and the instruction it decodes into; null when capstone could not
  // be opened (every instruction is then kUnknown).
  struct Disassembler;
  struct CloseDisassembler {
    void operator()(Disassembler* disassembler) const;
  };
  std::unique_ptr<Disassembler, CloseDisassembler> disassembler_;
  std::unordered_map<uint64_t, InsnInfo> cache_;
  uint64_t undecodable_ = 0;
};

}  // namespace ptd::image
