#include "decoder/parallel/stack_join.h"

#include "absl/strings/str_format.h"

namespace ptd::decoder {
namespace {

// Ends open frames [depth, size) top first at `record`, as CallStackModel's PopTop does.
void EndFramesFrom(std::vector<BorderFrame>* stack, size_t depth, const BorderRecord& record,
                   std::vector<BorderEnd>* ends) {
  while (stack->size() > depth) {
    const BorderFrame& frame = stack->back();
    if (frame.emitted) {
      ends->push_back({record.output_position, record.time, record.instructions - frame.begin_instructions,
                       record.cycles - frame.begin_cycles});
    }
    stack->pop_back();
  }
}

}  // namespace

JoinOutcome JoinBorder(std::vector<BorderFrame>* open, const std::vector<BorderRecord>& records,
                       const std::vector<BorderFrame>& piece_open) {
  JoinOutcome outcome;
  // A copy (O(depth), the join's bound), so that a failed join leaves the stack as it
  // was for the serial replay.
  std::vector<BorderFrame> stack = *open;
  auto fail = [&](std::string why) {
    outcome.holds = false;
    outcome.failed = std::move(why);
    outcome.ends.clear();
    return outcome;
  };
  for (const BorderRecord& record : records) {
    switch (record.kind) {
      case BorderRecord::Kind::kContinueTop: {
        if (stack.empty()) {
          return fail(absl::StrFormat("the piece starts in a frame at 0x%x but no frame is open", record.address));
        }
        const BorderFrame& top = stack.back();
        if (!top.contains(record.address) && top.main_part() != record.home) {
          return fail(absl::StrFormat("the piece starts at 0x%x, outside the open top frame's function [0x%x, 0x%x)",
                                      record.address, top.fn_start, top.fn_end));
        }
        break;
      }
      case BorderRecord::Kind::kReturn: {
        // OnReturn over one stack: the innermost frame returning to the target ends with
        // every frame above it, and execution goes on in its caller.
        size_t i = stack.size();
        while (i > 0 && stack[i - 1].return_address != record.address) --i;
        if (i == 0) {
          return fail(absl::StrFormat("the return to 0x%x matches no open frame's return address", record.address));
        }
        const size_t returning = i - 1;
        if (returning == 0) {
          return fail(absl::StrFormat("the return to 0x%x leaves no open frame: its caller is inferred", record.address));
        }
        if (!stack[returning - 1].contains(record.address)) {
          return fail(absl::StrFormat("the return to 0x%x lands outside the function of the frame it returns to",
                                      record.address));
        }
        EndFramesFrom(&stack, returning, record, &outcome.ends);
        break;
      }
      case BorderRecord::Kind::kEndAll:
        EndFramesFrom(&stack, 0, record, &outcome.ends);
        break;
    }
  }
  stack.insert(stack.end(), piece_open.begin(), piece_open.end());
  *open = std::move(stack);
  outcome.holds = true;
  return outcome;
}

}  // namespace ptd::decoder
