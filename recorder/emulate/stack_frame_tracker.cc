#include "recorder/emulate/stack_frame_tracker.h"

namespace ptd {

void StackFrameTracker::OnRetire(const ExecutedInsn& insn, uint64_t rsp_before,
                                 uint64_t rsp_after, uint64_t time, GroundTruthWriter* out) {
  const bool is_call = insn.kind == BranchKind::kDirectCall || insn.kind == BranchKind::kIndirectCall;
  // A call to the next instruction only reads the IP (PIC thunks); it opens no frame.
  if (is_call && insn.next_ip != insn.ip + insn.size) {
    frames_.push_back(rsp_before);
    if (out != nullptr) {
      out->Call(pid_, tid_, time, insn.ip, insn.next_ip, rsp_before,
                static_cast<uint32_t>(frames_.size()), 0);
    }
    return;
  }
  if (frames_.empty() || rsp_after < frames_.back()) return;
  uint64_t popped = 0;
  if (insn.kind == BranchKind::kReturn) {
    frames_.pop_back();
    if (out != nullptr) {
      out->Return(pid_, tid_, time, insn.ip, insn.next_ip, static_cast<uint32_t>(frames_.size()));
    }
  }
  while (!frames_.empty() && rsp_after >= frames_.back()) {
    frames_.pop_back();
    ++popped;
  }
  if (popped > 0 && out != nullptr) {
    out->Unwind(pid_, tid_, time, insn.ip, insn.next_ip, popped,
                static_cast<uint32_t>(frames_.size()));
  }
}

void StackFrameTracker::OnSignalHandler(uint64_t interrupted, uint64_t handler, uint64_t rsp,
                                        int signo, uint64_t time, GroundTruthWriter* out) {
  frames_.push_back(rsp + 8);
  if (out != nullptr) {
    out->Signal(pid_, tid_, time, interrupted, handler, signo);
    out->Call(pid_, tid_, time, interrupted, handler, rsp + 8,
              static_cast<uint32_t>(frames_.size()), 1);
  }
}

}  // namespace ptd
