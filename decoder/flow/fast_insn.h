#pragma once
// One instruction as the fast decoder knows it (fast_block_decoder.h), in libipt's terms:
// what the x86 decoder says of it (image/insn_classifier.h), and where it is.

#include <cstdint>

#include "image/insn_classifier.h"

namespace ptd::decoder {

// 24 bytes: a copy is in every block of every cache.
struct FastInsn : image::X86Insn {
  uint64_t ip = 0;
};
static_assert(sizeof(FastInsn) == 24);

}  // namespace ptd::decoder
