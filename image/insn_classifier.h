#pragma once
// The one x86 instruction decoder: Zydis 4 decodes an instruction into what Intel PT
// cares about. DecodeX86 gives libipt's classes (the fast flow decoder's blocks); the
// InsnClassifier gives BranchKind (length, the target of direct branches, which far
// transfer), cached per address: a traced program executes the same few thousand
// instructions over and over. The cache is keyed by address only, so the owner must
// Invalidate() when code may change (exec, munmap/mmap). The emulator generates packets
// from it; the decoder classifies the block ends libipt does not (Decode, no cache).
// (Capstone 4, used before, could not decode CET shadow-stack instructions nor ptwrite.)

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "absl/types/span.h"

struct ZydisDecoder_;  // <Zydis/Decoder.h>: ZydisDecoder

namespace ptd::image {

// One instruction in libipt's terms.
struct X86Insn {
  uint64_t target = 0;                // direct jumps and calls, conditional jumps
  enum pt_insn_class iclass = ptic_error;  // ptic_error: the bytes do not decode
  uint8_t size = 0;
  bool direct = false;                // conditional jumps, direct jumps and calls
  bool is_syscall = false;            // syscall / sysenter
};
// Decodes the instruction at `ip` from `bytes` (up to 15 bytes) in `mode` (unknown: 64-bit).
X86Insn DecodeX86(enum pt_exec_mode mode, uint64_t ip, const uint8_t* bytes, size_t size);
// Zydis's decoder for `mode` (unknown: 64-bit), for callers that need operands too; one
// for every thread (it holds only the mode and is never written).
const ::ZydisDecoder_& ZydisDecoderFor(enum pt_exec_mode mode);

enum class BranchKind : uint8_t {
  kNone,          // falls through; no packet
  kCondJump,      // jcc, jrcxz, loop*: one TNT bit
  kDirectJump,    // jmp rel: no packet
  kIndirectJump,  // jmp r/m: TIP
  kDirectCall,    // call rel: no packet; pushes the return address (unless to next insn)
  kIndirectCall,  // call r/m: TIP; pushes the return address
  kReturn,        // ret: taken TNT bit when compressed, TIP otherwise
  kFarTransfer,   // syscall, sysenter, int n, far jmp/call/ret, iret: leaves user space
  kUnknown,       // the bytes do not decode; treated as kNone, counted
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
  // The instruction at `ip`, decoded from `bytes` (up to 15 bytes starting at ip) on a
  // cache miss. An undecodable instruction yields size 0 and kind kUnknown.
  const InsnInfo& Classify(uint64_t ip, absl::Span<const uint8_t> bytes);
  // The cached entry, or nullptr.
  const InsnInfo* Find(uint64_t ip) const;
  // Decodes without touching the cache (64-bit code).
  static InsnInfo Decode(uint64_t ip, absl::Span<const uint8_t> bytes);

  void Invalidate() { cache_.clear(); }
  uint64_t undecodable() const { return undecodable_; }
  size_t cached() const { return cache_.size(); }

 private:
  std::unordered_map<uint64_t, InsnInfo> cache_;
  uint64_t undecodable_ = 0;
};

}  // namespace ptd::image
