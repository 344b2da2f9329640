#pragma once
// What the call-stack model should write for a thread, derived from the emulator's
// ground truth (executed instructions + call/return/unwind events from RSP), not from
// PT: the reference the decoder's output is compared with. It applies the model's own
// conventions (docs/decoder.md, "Comparing with ground truth"):
// - the bottom frame is the function of the first instruction; a return below it infers
//   a parent named after the return target, begun at the segment start (written first);
// - a call into a PLT stub is one slice named after where the stub leaves the PLT;
// - leaving the current function other than by call/return/unwind (a jump) ends its
//   slice and begins a sibling named after the target (tail call);
// - a syscall is a "[syscall]" child slice of 0 instructions;
// - an injected overflow (LOST) closes every slice, writes an instant, and starts a new
//   segment where execution resumes (at the depth the next call/return/unwind implies);
// - per-CPU mode: a thread switched out while tracing was on (not right after a syscall)
//   gets an "[untraced]" child of 0 instructions there (disable, re-enable at the same IP).
// Lines have RecordingSink's format: "B name", "E name i=N", "I name".

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "decoder/model/function_resolver.h"
#include "decoder/flow/insn_classifier.h"
#include "recorder/emulate/ground_truth.h"
#include "sideband/cpu_schedule.h"

namespace ptd::decoder::testing {

// Slices for instructions [first, thread.ips.size()) of `thread`. `first` > 0 is a
// trace that starts mid-stack (snapshot). `classifier` tells a `ret` past the first
// frame (no ground-truth RETURN: the frame was entered before tracing) from a jump.
// `at_time`, if set, is told each ground-truth event's and instruction's time before it
// is used (a timed image follows it: code replaced at the same address, an exec). `switched_out`: the
// instruction indices (ascending) before which the thread lost its CPU (per-CPU traces).
std::vector<std::string> ExpectedSlices(const GroundTruthThread& thread, FunctionResolver* resolver,
                                        InsnClassifier* classifier, image::ProcessImage* image,
                                        size_t first = 0, std::function<void(uint64_t)> at_time = {},
                                        std::vector<size_t> switched_out = {});

// Per-CPU traces: the instruction indices of `thread` before which `schedule` (the
// emulator's synthesized one) took its CPU away, ascending: ExpectedSlices' `switched_out`.
// Instructions stamped before a switch-out ran before it (a run of the truth never
// spans a switch of its thread).
std::vector<size_t> SwitchedOut(const GroundTruthThread& thread, const CpuSchedule& schedule);

// "" when equal; otherwise where the sequences first differ, with a few lines of
// context from both.
std::string FirstDifference(const std::vector<std::string>& expected,
                            const std::vector<std::string>& actual, size_t context = 8);

}  // namespace ptd::decoder::testing
