#pragma once
// One retired instruction as the packet generator sees it: where it was, how long it
// is, what kind of control transfer it is, and where execution went next. The same
// plain value comes from the ptrace stepper (real execution) and the synthetic walker.

#include <cstdint>

namespace ptd {

// The distinctions Intel PT makes when deciding which packet an instruction needs.
enum class BranchKind : uint8_t {
  kNone,          // falls through; no packet
  kCondJump,      // jcc, jrcxz, loop*: one TNT bit
  kDirectJump,    // jmp rel: no packet
  kIndirectJump,  // jmp r/m: TIP
  kDirectCall,    // call rel: no packet; pushes the return address (unless to next insn)
  kIndirectCall,  // call r/m: TIP; pushes the return address
  kReturn,        // ret: taken TNT bit when compressed, TIP otherwise
  kFarTransfer,   // syscall, sysenter, int n, far jmp/call/ret, iret: leaves user space
  kUnknown,       // capstone could not decode it; treated as kNone, counted
};

const char* BranchKindName(BranchKind kind);

struct ExecutedInsn {
  uint64_t ip = 0;
  uint64_t next_ip = 0;  // the IP of the next instruction this thread executed
  uint8_t size = 0;
  BranchKind kind = BranchKind::kNone;
};

}  // namespace ptd
