#pragma once
// The ground-truth call stack of one thread, derived from the stack pointer alone: a
// frame begins at a call (or signal handler entry) with the RSP before it, and lives
// while RSP stays below that value. A ret that lifts RSP past the innermost frame is a
// return; RSP lifted past frames by anything else (longjmp, C++ unwinding, an OCaml
// raise) unwinds them. Independent of PT and of any decoder's reasoning.

#include <cstdint>
#include <vector>

#include "recorder/ptgen/executed_insn.h"
#include "recorder/emulate/ground_truth_writer.h"

namespace ptd {

class StackFrameTracker {
 public:
  StackFrameTracker(int pid, int tid) : pid_(pid), tid_(tid) {}

  // `insn` retired at `time`; RSP was `rsp_before` before it and is `rsp_after` now.
  void OnRetire(const ExecutedInsn& insn, uint64_t rsp_before, uint64_t rsp_after,
                uint64_t time, GroundTruthWriter* out);
  // The kernel entered a signal handler at `handler` with RSP `rsp` (pointing at the
  // return address into the restorer).
  void OnSignalHandler(uint64_t interrupted, uint64_t handler, uint64_t rsp, int signo,
                       uint64_t time, GroundTruthWriter* out);
  // Forgets every frame (exec).
  void Reset() { frames_.clear(); }

  size_t depth() const { return frames_.size(); }
  void set_pid(int pid) { pid_ = pid; }
  // A forked child continues on a copy of its parent's stack.
  void InheritFrames(const StackFrameTracker& parent) { frames_ = parent.frames_; }

 private:
  std::vector<uint64_t> frames_;    // RSP before each live call, innermost last
  int pid_;
  int tid_;
};

}  // namespace ptd
