#include "recorder/emulate/insn_classifier.h"

namespace ptd {
namespace {

bool InGroup(const cs_detail& detail, uint8_t group) {
  for (uint8_t i = 0; i < detail.groups_count; ++i) {
    if (detail.groups[i] == group) return true;
  }
  return false;
}

}  // namespace

InsnClassifier::InsnClassifier() {
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle_) == CS_ERR_OK) {
    cs_option(handle_, CS_OPT_DETAIL, CS_OPT_ON);
    scratch_ = cs_malloc(handle_);
  } else {
    handle_ = 0;
  }
}

InsnClassifier::~InsnClassifier() {
  if (scratch_ != nullptr) cs_free(scratch_, 1);
  if (handle_ != 0) cs_close(&handle_);
}

InsnInfo InsnClassifier::Decode(uint64_t ip, absl::Span<const uint8_t> bytes) const {
  InsnInfo info;
  info.kind = BranchKind::kUnknown;
  if (handle_ == 0 || scratch_ == nullptr || bytes.empty()) return info;
  const uint8_t* code = bytes.data();
  size_t size = bytes.size();
  uint64_t address = ip;
  if (!cs_disasm_iter(handle_, &code, &size, &address, scratch_)) return info;
  const cs_insn& insn = *scratch_;
  const cs_detail& detail = *insn.detail;
  info.size = static_cast<uint8_t>(insn.size);
  info.kind = BranchKind::kNone;
  const cs_x86& x86 = detail.x86;
  const bool direct = x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM;
  if (direct) info.direct_target = static_cast<uint64_t>(x86.operands[0].imm);
  switch (insn.id) {
    case X86_INS_SYSCALL:
    case X86_INS_SYSENTER:
      info.kind = BranchKind::kFarTransfer;
      info.is_syscall = true;
      return info;
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
    case X86_INS_LJMP:
    case X86_INS_LCALL:
    case X86_INS_RETF:
    case X86_INS_IRET:
    case X86_INS_IRETD:
    case X86_INS_IRETQ:
    case X86_INS_SYSRET:
    case X86_INS_SYSEXIT:
      info.kind = BranchKind::kFarTransfer;
      return info;
    default:
      break;
  }
  if (InGroup(detail, CS_GRP_INT)) {
    info.kind = BranchKind::kFarTransfer;
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

}  // namespace ptd
