#pragma once
// One instruction as the fast decoder knows it (fast_block_decoder.h), in libipt's terms.

#include <intel-pt.h>

#include <cstdint>

namespace ptd::decoder {

struct FastInsn {
  uint64_t ip = 0;
  uint8_t size = 0;
  pt_insn_class iclass = ptic_error;
  bool direct = false;   // near call/jump with the target in the instruction
  uint64_t target = 0;   // direct branches (conditional ones too)
};

}  // namespace ptd::decoder
