#include "decoder/insn_classifier.h"

namespace ptd::decoder {

InsnInfo InsnClassifier::ClassifyMissed(uint64_t address) {
  InsnInfo info;
  if (auto it = cache_.find(address); it != cache_.end()) {
    info = it->second;
  } else {
    uint8_t bytes[16];
    size_t n = image_->ReadCode(address, bytes, sizeof bytes);
    info = ClassifyBytes(bytes, n, address);
    cache_.emplace(address, info);
  }
  recent_.Put(address, info);
  return info;
}

namespace {

InsnClass ClassOf(const image::InsnInfo& insn) {
  using image::BranchKind;
  switch (insn.kind) {
    case BranchKind::kNone: return InsnClass::kOther;
    case BranchKind::kCondJump: return InsnClass::kCondJump;
    case BranchKind::kDirectJump:
    case BranchKind::kIndirectJump: return InsnClass::kJump;
    case BranchKind::kDirectCall:
    case BranchKind::kIndirectCall: return InsnClass::kCall;
    case BranchKind::kReturn: return InsnClass::kReturn;
    case BranchKind::kFarTransfer:
      switch (insn.far) {
        case image::FarKind::kReturn: return InsnClass::kFarReturn;
        case image::FarKind::kJump: return InsnClass::kFarJump;
        default: return InsnClass::kFarCall;
      }
    case BranchKind::kUnknown: break;
  }
  return InsnClass::kUnknown;
}

}  // namespace

InsnInfo InsnClassifier::ClassifyBytes(const uint8_t* bytes, size_t size, uint64_t address) {
  const image::InsnInfo insn = x86_.Decode(address, absl::MakeConstSpan(bytes, size));
  InsnInfo info;
  if (insn.size == 0) {
    ++undecodable_;
    return info;
  }
  info.size = insn.size;
  info.klass = ClassOf(insn);
  return info;
}

}  // namespace ptd::decoder
