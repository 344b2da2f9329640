#pragma once
// One retired instruction as the packet generator sees it: where it was, how long it
// is, what kind of control transfer it is, and where execution went next. The same
// plain value comes from the ptrace stepper (real execution) and the synthetic walker.

#include <cstdint>

#include "image/insn_classifier.h"

namespace ptd {

// The distinctions Intel PT makes when deciding which packet an instruction needs.
using image::BranchKind;

const char* BranchKindName(BranchKind kind);

struct ExecutedInsn {
  uint64_t ip = 0;
  uint64_t next_ip = 0;  // the IP of the next instruction this thread executed
  uint8_t size = 0;
  BranchKind kind = BranchKind::kNone;
};

}  // namespace ptd
