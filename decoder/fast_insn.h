#pragma once
// One instruction as the fast decoder knows it (fast_block_decoder.h), in libipt's terms.

#include <intel-pt.h>

#include <cstdint>

namespace ptd::decoder {

// 24 bytes (the 8-byte fields first): a copy is in every block of every cache.
struct FastInsn {
  uint64_t ip = 0;
  uint64_t target = 0;   // direct branches (conditional ones too)
  pt_insn_class iclass = ptic_error;
  uint8_t size = 0;
  bool direct = false;   // near call/jump with the target in the instruction
};
static_assert(sizeof(FastInsn) == 24);

}  // namespace ptd::decoder
