#include "decoder/flow/insn_classifier.h"

#include "decoder/flow/fast_block_decoder.h"
#include "decoder/flow/libipt_insn_oracle.h"
#include "image/insn_classifier.h"

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

InsnClass FromLibipt(enum pt_insn_class klass) {
  switch (klass) {
    case ptic_other:
    case ptic_ptwrite: return InsnClass::kOther;  // no branch
    case ptic_call: return InsnClass::kCall;
    case ptic_return: return InsnClass::kReturn;
    case ptic_jump: return InsnClass::kJump;
    case ptic_cond_jump: return InsnClass::kCondJump;
    case ptic_far_call: return InsnClass::kFarCall;
    case ptic_far_return: return InsnClass::kFarReturn;
    case ptic_far_jump: return InsnClass::kFarJump;
    default: return InsnClass::kUnknown;
  }
}

InsnInfo InsnClassifier::ClassifyBytes(const uint8_t* bytes, size_t size, uint64_t address) {
  const image::X86Insn insn = image::DecodeX86(ptem_64bit, address, bytes, size);
  InsnInfo info;
  if (insn.iclass == ptic_error) {
    // What Zydis refuses, libipt may still decode (its length decoder takes bytes no
    // instruction has, as the trace did): its answer, as the fast decoder takes it, so
    // both decoders size a call alike.
    FastInsn libipt;
    if (DecodeInsnWithLibipt(ptem_64bit, address, bytes, size, &libipt)) {
      info.size = libipt.size;
      info.klass = FromLibipt(libipt.iclass);
      return info;
    }
    ++undecodable_;
    return info;
  }
  info.size = insn.size;
  info.klass = FromLibipt(insn.iclass);
  return info;
}

}  // namespace ptd::decoder
