#include "image/insn_classifier.h"

#include <Zydis/Decoder.h>

#include <array>

namespace ptd::image {

const ZydisDecoder& ZydisDecoderFor(pt_exec_mode mode) {
  static const std::array<ZydisDecoder, 3> decoders = [] {
    std::array<ZydisDecoder, 3> d;
    ZydisDecoderInit(&d[0], ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecoderInit(&d[1], ZYDIS_MACHINE_MODE_LEGACY_32, ZYDIS_STACK_WIDTH_32);
    ZydisDecoderInit(&d[2], ZYDIS_MACHINE_MODE_LEGACY_16, ZYDIS_STACK_WIDTH_16);
    return d;
  }();
  switch (mode) {
    case ptem_32bit: return decoders[1];
    case ptem_16bit: return decoders[2];
    default: return decoders[0];
  }
}

X86Insn DecodeX86(pt_exec_mode mode, uint64_t ip, const uint8_t* bytes, size_t size) {
  X86Insn insn;
  ZydisDecodedInstruction z;
  // No operands decoded: the category, branch type and raw immediate say enough.
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&ZydisDecoderFor(mode), nullptr, bytes, size, &z))) return insn;
  insn.size = z.length;
  const bool far = z.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
  const bool relative = z.raw.imm[0].is_relative;
  if (relative) insn.target = ip + z.length + static_cast<uint64_t>(z.raw.imm[0].value.s);
  switch (z.meta.category) {
    case ZYDIS_CATEGORY_COND_BR:  // jcc, jrcxz, loop*
      insn.iclass = ptic_cond_jump;
      insn.direct = true;
      break;
    case ZYDIS_CATEGORY_UNCOND_BR:
      insn.iclass = far ? ptic_far_jump : ptic_jump;
      insn.direct = !far && relative;
      break;
    case ZYDIS_CATEGORY_CALL:
      insn.iclass = far ? ptic_far_call : ptic_call;
      insn.direct = !far && relative;
      break;
    case ZYDIS_CATEGORY_RET:
      insn.iclass = far ? ptic_far_return : ptic_return;
      break;
    case ZYDIS_CATEGORY_SYSCALL:
    case ZYDIS_CATEGORY_INTERRUPT: insn.iclass = ptic_far_call; break;  // int n, int3, into
    case ZYDIS_CATEGORY_SYSRET: insn.iclass = ptic_far_return; break;
    default: insn.iclass = ptic_other; break;
  }
  switch (z.mnemonic) {
    case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD:
    case ZYDIS_MNEMONIC_IRETQ:
    case ZYDIS_MNEMONIC_SYSEXIT:
    case ZYDIS_MNEMONIC_SYSRET: insn.iclass = ptic_far_return; break;
    case ZYDIS_MNEMONIC_SYSENTER:
    case ZYDIS_MNEMONIC_SYSCALL:
      insn.iclass = ptic_far_call;
      insn.is_syscall = true;
      break;
    case ZYDIS_MNEMONIC_PTWRITE: insn.iclass = ptic_ptwrite; break;
    case ZYDIS_MNEMONIC_XBEGIN:
    case ZYDIS_MNEMONIC_XABORT:
    case ZYDIS_MNEMONIC_XEND:
      // TSX: no branch to Intel PT (and libipt); an abort is an event.
      insn.iclass = ptic_other;
      insn.direct = false;
      break;
    default: break;
  }
  if (insn.iclass != ptic_cond_jump && !insn.direct) insn.target = 0;
  return insn;
}

InsnInfo InsnClassifier::Decode(uint64_t ip, absl::Span<const uint8_t> bytes) {
  InsnInfo info;
  const X86Insn insn = DecodeX86(ptem_64bit, ip, bytes.data(), bytes.size());
  info.size = insn.size;
  info.direct_target = insn.target;
  switch (insn.iclass) {
    case ptic_error: info.kind = BranchKind::kUnknown; break;
    case ptic_cond_jump: info.kind = BranchKind::kCondJump; break;
    case ptic_jump: info.kind = insn.direct ? BranchKind::kDirectJump : BranchKind::kIndirectJump; break;
    case ptic_call: info.kind = insn.direct ? BranchKind::kDirectCall : BranchKind::kIndirectCall; break;
    case ptic_return: info.kind = BranchKind::kReturn; break;
    case ptic_far_call:
    case ptic_far_return:
    case ptic_far_jump:
      info.kind = BranchKind::kFarTransfer;
      info.far = insn.iclass == ptic_far_call ? FarKind::kCall
                 : insn.iclass == ptic_far_return ? FarKind::kReturn
                                                  : FarKind::kJump;
      info.is_syscall = insn.is_syscall;
      break;
    default: info.kind = BranchKind::kNone; break;  // other, ptwrite
  }
  return info;
}

const InsnInfo& InsnClassifier::Classify(uint64_t ip, absl::Span<const uint8_t> bytes) {
  auto it = cache_.find(ip);
  if (it != cache_.end()) return it->second;
  InsnInfo info = Decode(ip, bytes);
  if (info.size == 0) ++undecodable_;
  return cache_.emplace(ip, info).first->second;
}

const InsnInfo* InsnClassifier::Find(uint64_t ip) const {
  auto it = cache_.find(ip);
  return it == cache_.end() ? nullptr : &it->second;
}

}  // namespace ptd::image
