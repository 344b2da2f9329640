#pragma once
// Classifies single instructions where libipt does not tell: the last instruction of a
// block the 2.0.5 block cache reports as ptic_error, and the size of a block's final call
// (for its return address), in libipt's terms. The decoding itself is the project's one
// classifier (image/insn_classifier.h). Results are cached by address, so each block end
// is decoded once.

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "common/recent_by_address.h"
#include "image/process_image.h"

namespace ptd::decoder {

// Same meaning as libipt's pt_insn_class.
enum class InsnClass : uint8_t {
  kUnknown,   // bytes missing or Zydis cannot decode them
  kOther,
  kCall,
  kReturn,
  kJump,
  kCondJump,
  kFarCall,   // syscall, sysenter, int n
  kFarReturn, // sysret, iret
  kFarJump,
};

InsnClass FromLibipt(enum pt_insn_class klass);

struct InsnInfo {
  InsnClass klass = InsnClass::kUnknown;
  uint8_t size = 0;
};

class InsnClassifier {
 public:
  explicit InsnClassifier(image::ProcessImage* image) : image_(image) {}
  InsnClassifier(const InsnClassifier&) = delete;
  InsnClassifier& operator=(const InsnClassifier&) = delete;

  InsnInfo Classify(uint64_t address) {
    if (const InsnInfo* hit = recent_.Find(address)) return *hit;
    return ClassifyMissed(address);
  }
  // The code changed (another image, or mappings replaced): cached results are dropped.
  void SetImage(image::ProcessImage* image) {
    image_ = image;
    cache_.clear();
    recent_.Clear();
  }
  // Classifies raw bytes (for blocks whose last instruction spans two sections).
  InsnInfo ClassifyBytes(const uint8_t* bytes, size_t size, uint64_t address);
  // Instructions neither Zydis nor libipt could decode (they degrade to kUnknown,
  // counted here).
  uint64_t undecodable() const { return undecodable_; }

 private:
  image::ProcessImage* image_;
  absl::flat_hash_map<uint64_t, InsnInfo> cache_;
  // The last addresses looked up, in front of cache_ (the same few call and syscall sites
  // come back again and again).
  RecentByAddress<InsnInfo, 256> recent_;
  // Classify past recent_: from cache_ or decoded, then kept in recent_.
  InsnInfo ClassifyMissed(uint64_t address);
  uint64_t undecodable_ = 0;
};

}  // namespace ptd::decoder
