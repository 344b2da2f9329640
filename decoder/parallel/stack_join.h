#pragma once
// The join of a piece's call stack to the stack the pieces before it left open
// (docs/decoder.md, "Pieces with their own call-stack model"). A piece's own model starts
// on a stack it cannot see; whatever it did below its start it records as border records,
// each with the answer it assumed. JoinBorder checks those answers against the real open
// stack, the way CallStackModel would have decided over one continuous stack, and says
// which frames below the start end where: O(stack depth) per border, nothing per event.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ptd::decoder {

// A frame open at a piece's border (CallStackModel's frame as the join needs it).
struct BorderFrame {
  uint64_t fn_start = 0;  // [fn_start, fn_end): its function's range
  uint64_t fn_end = 0;
  uint64_t home = 0;            // the start of the function's main part (foo for foo.cold); 0: fn_start
  uint64_t return_address = 0;  // 0: unknown (inferred or entered, not called)
  uint64_t begin_instructions = 0;
  uint64_t begin_cycles = 0;
  bool emitted = false;  // it has a slice (folded frames have none)
  bool contains(uint64_t address) const { return address >= fn_start && address < fn_end; }
  uint64_t main_part() const { return home != 0 ? home : fn_start; }
};

// What a piece did below its start, in the order it happened.
struct BorderRecord {
  enum class Kind : uint8_t {
    // The piece's first frame runs `address`: the open top frame, continued (the piece
    // wrote no Begin for it).
    kContinueTop,
    // A return to `address` that popped every frame of the piece: the piece assumed it
    // ends open frames down to the one returning there, and goes on in that one's caller.
    kReturn,
    // Every frame ends (a decode error, an overflow, lost data, the stream's end).
    kEndAll,
  };
  Kind kind = Kind::kReturn;
  uint64_t address = 0;  // kContinueTop: the first frame's; kReturn: the return's target
  // kContinueTop: the function holding `address` as the piece resolved it (its main part).
  uint64_t home = 0;
  // kReturn, kEndAll: the event's counts (the stream's, after the pieces before), and
  // where in the piece's slice output the Ends go (the number of its slice events before).
  uint64_t time = 0;
  uint64_t instructions = 0;
  uint64_t cycles = 0;
  size_t output_position = 0;
};

// An End record the join writes into a piece's output for a frame from below its start.
struct BorderEnd {
  size_t output_position = 0;  // before the piece's slice event of this index
  uint64_t time = 0;
  uint64_t instructions = 0;  // of the slice: from its Begin (an earlier piece's) to here
  uint64_t cycles = 0;
};

struct JoinOutcome {
  bool holds = false;
  std::string failed;  // !holds: the assumption that did not hold
  std::vector<BorderEnd> ends;
};

// Checks `records` against `open` (the frames open before the piece, bottom first) and
// turns `open` into the frames open after it: what is left of it, then `piece_open` (the
// frames the piece opened and left open, bottom first). When an assumption fails, `open`
// is left as it was and the piece is to be replayed through the serial model.
JoinOutcome JoinBorder(std::vector<BorderFrame>* open, const std::vector<BorderRecord>& records,
                       const std::vector<BorderFrame>& piece_open);

}  // namespace ptd::decoder
