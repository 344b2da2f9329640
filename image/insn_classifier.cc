#include "image/insn_classifier.h"

#include <utility>

namespace ptd::image {
namespace {

bool InGroup(const cs_detail& detail, uint8_t group) {
  for (uint8_t i = 0; i < detail.groups_count; ++i) {
    if (detail.groups[i] == group) return true;
  }
  return false;
}

// Far transfers, by what libipt calls them (ptic_far_call/_return/_jump).
FarKind FarKindOf(unsigned id) {
  static constexpr std::pair<x86_insn, FarKind> kFar[] = {
      {X86_INS_SYSCALL, FarKind::kCall}, {X86_INS_SYSENTER, FarKind::kCall}, {X86_INS_LCALL, FarKind::kCall},
      {X86_INS_INT, FarKind::kCall},     {X86_INS_INT1, FarKind::kCall},     {X86_INS_INT3, FarKind::kCall},
      {X86_INS_INTO, FarKind::kCall},    {X86_INS_LJMP, FarKind::kJump},     {X86_INS_RETF, FarKind::kReturn},
      {X86_INS_RETFQ, FarKind::kReturn}, {X86_INS_IRET, FarKind::kReturn},   {X86_INS_IRETD, FarKind::kReturn},
      {X86_INS_IRETQ, FarKind::kReturn}, {X86_INS_SYSRET, FarKind::kReturn}, {X86_INS_SYSEXIT, FarKind::kReturn},
  };
  for (const auto& [insn, far] : kFar) {
    if (insn == id) return far;
  }
  return FarKind::kNone;
}

}  // namespace

struct InsnClassifier::Disassembler {
  csh handle = 0;
  cs_insn* insn = nullptr;
};

void InsnClassifier::CloseDisassembler::operator()(Disassembler* disassembler) const {
  if (disassembler->insn != nullptr) cs_free(disassembler->insn, 1);
  cs_close(&disassembler->handle);
  delete disassembler;
}

InsnClassifier::InsnClassifier() {
  csh handle = 0;
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle) != CS_ERR_OK) return;
  cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON);
  disassembler_.reset(new Disassembler{handle, cs_malloc(handle)});
}

InsnInfo InsnClassifier::Decode(uint64_t ip, absl::Span<const uint8_t> bytes) const {
  InsnInfo info;
  info.kind = BranchKind::kUnknown;
  if (!disassembler_ || disassembler_->insn == nullptr || bytes.empty()) return info;
  const uint8_t* code = bytes.data();
  size_t size = bytes.size();
  uint64_t address = ip;
  if (!cs_disasm_iter(disassembler_->handle, &code, &size, &address, disassembler_->insn)) return info;
  const cs_insn& insn = *disassembler_->insn;
  const cs_detail& detail = *insn.detail;
  info.size = static_cast<uint8_t>(insn.size);
  info.kind = BranchKind::kNone;
  const cs_x86& x86 = detail.x86;
  const bool direct = x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM;
  if (direct) info.direct_target = static_cast<uint64_t>(x86.operands[0].imm);
  if (const FarKind far = FarKindOf(insn.id); far != FarKind::kNone) {
    info.kind = BranchKind::kFarTransfer;
    info.far = far;
    info.is_syscall = insn.id == X86_INS_SYSCALL || insn.id == X86_INS_SYSENTER;
    return info;
  }
  switch (insn.id) {
    case X86_INS_LOOP:
    case X86_INS_LOOPE:
    case X86_INS_LOOPNE:
    case X86_INS_JRCXZ:
    case X86_INS_JECXZ:
    case X86_INS_JCXZ:
      // Conditional for PT (one TNT bit), but not all in capstone's jump group.
      info.kind = BranchKind::kCondJump;
      return info;
    case X86_INS_XBEGIN:
      // Capstone files xbegin under "jump", but it only names the abort handler: no
      // branch on commit, and Intel PT (and libipt) treat it as an ordinary instruction.
      info.direct_target = 0;
      return info;
    default:
      break;
  }
  if (InGroup(detail, CS_GRP_INT)) {
    info.kind = BranchKind::kFarTransfer;
    info.far = FarKind::kCall;
  } else if (InGroup(detail, CS_GRP_RET)) {
    info.kind = BranchKind::kReturn;
  } else if (InGroup(detail, CS_GRP_CALL)) {
    info.kind = direct ? BranchKind::kDirectCall : BranchKind::kIndirectCall;
  } else if (InGroup(detail, CS_GRP_JUMP)) {
    if (insn.id == X86_INS_JMP) {
      info.kind = direct ? BranchKind::kDirectJump : BranchKind::kIndirectJump;
    } else {
      // jcc, jrcxz/jecxz, loop/loope/loopne: all conditional and direct.
      info.kind = BranchKind::kCondJump;
    }
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
