#include "decoder/insn_classifier.h"

#include <capstone/capstone.h>

#include <cstring>

namespace ptd::decoder {

InsnClassifier::InsnClassifier(image::ProcessImage* image) : image_(image) {
  csh handle;
  ok_ = cs_open(CS_ARCH_X86, CS_MODE_64, &handle) == CS_ERR_OK;
  if (ok_) {
    cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON);
    handle_ = handle;
  }
}

InsnClassifier::~InsnClassifier() {
  if (ok_) {
    csh handle = handle_;
    cs_close(&handle);
  }
}

InsnInfo InsnClassifier::Classify(uint64_t address) {
  auto it = cache_.find(address);
  if (it != cache_.end()) return it->second;
  uint8_t bytes[16];
  size_t n = image_->ReadCode(address, bytes, sizeof bytes);
  InsnInfo info = ClassifyBytes(bytes, n, address);
  cache_.emplace(address, info);
  return info;
}

InsnInfo InsnClassifier::ClassifyBytes(const uint8_t* bytes, size_t size, uint64_t address) {
  InsnInfo info;
  if (!ok_ || size == 0) {
    ++undecodable_;
    return info;
  }
  cs_insn* insn = nullptr;
  size_t count = cs_disasm(handle_, bytes, size, address, 1, &insn);
  if (count == 0) {
    ++undecodable_;
    return info;
  }
  info.size = static_cast<uint8_t>(insn->size);
  info.klass = InsnClass::kOther;
  switch (insn->id) {
    case X86_INS_CALL:
      info.klass = InsnClass::kCall;
      break;
    case X86_INS_LCALL:
    case X86_INS_SYSCALL:
    case X86_INS_SYSENTER:
    case X86_INS_INT:
    case X86_INS_INT1:
    case X86_INS_INT3:
    case X86_INS_INTO:
      info.klass = InsnClass::kFarCall;
      break;
    case X86_INS_RET:
      info.klass = InsnClass::kReturn;
      break;
    case X86_INS_RETF:
    case X86_INS_RETFQ:
    case X86_INS_IRET:
    case X86_INS_IRETD:
    case X86_INS_IRETQ:
    case X86_INS_SYSRET:
    case X86_INS_SYSEXIT:
      info.klass = InsnClass::kFarReturn;
      break;
    case X86_INS_JMP:
      info.klass = InsnClass::kJump;
      break;
    case X86_INS_LJMP:
      info.klass = InsnClass::kFarJump;
      break;
    default: {
      const cs_detail* detail = insn->detail;
      for (uint8_t i = 0; detail != nullptr && i < detail->groups_count; ++i) {
        if (detail->groups[i] == CS_GRP_JUMP) info.klass = InsnClass::kCondJump;
      }
      break;
    }
  }
  cs_free(insn, count);
  return info;
}

}  // namespace ptd::decoder
