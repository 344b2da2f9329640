#include "decoder/parallel/stack_join.h"

#include <vector>

#include "gtest/gtest.h"

namespace ptd::decoder {
namespace {

using Kind = BorderRecord::Kind;

// A called frame of function [start, start + 0x100), returning to `return_address`.
BorderFrame Called(uint64_t start, uint64_t return_address, uint64_t begin_instructions) {
  BorderFrame frame;
  frame.fn_start = start;
  frame.fn_end = start + 0x100;
  frame.return_address = return_address;
  frame.begin_instructions = begin_instructions;
  frame.begin_cycles = begin_instructions * 2;
  frame.emitted = true;
  return frame;
}

BorderRecord ContinueTop(uint64_t address) {
  BorderRecord record;
  record.kind = Kind::kContinueTop;
  record.address = address;
  record.home = address & ~uint64_t{0xff};
  return record;
}

BorderRecord At(Kind kind, uint64_t address, size_t position, uint64_t instructions) {
  BorderRecord record;
  record.kind = kind;
  record.address = address;
  record.output_position = position;
  record.time = instructions * 10;
  record.instructions = instructions;
  record.cycles = instructions * 2;
  return record;
}

// main (0x1000) → a (0x2000, called from main at 0x1010) → b (0x3000, from a at 0x2020).
std::vector<BorderFrame> MainAB() {
  return {Called(0x1000, 0, 0), Called(0x2000, 0x1010, 10), Called(0x3000, 0x2020, 20)};
}

TEST(StackJoinTest, AReturnBelowThePieceStartEndsTheOpenTopWithItsBeginsCounts) {
  std::vector<BorderFrame> open = MainAB();
  // The piece starts in b, returns from it to a, and calls c, which stays open.
  const JoinOutcome outcome = JoinBorder(&open, {ContinueTop(0x3040), At(Kind::kReturn, 0x2020, 7, 50)},
                                         {Called(0x4000, 0x2030, 60)});
  ASSERT_TRUE(outcome.holds) << outcome.failed;
  ASSERT_EQ(outcome.ends.size(), 1u);
  EXPECT_EQ(outcome.ends[0].output_position, 7u);
  EXPECT_EQ(outcome.ends[0].time, 500u);
  EXPECT_EQ(outcome.ends[0].instructions, 50u - 20u);  // b began at 20, in an earlier piece
  EXPECT_EQ(outcome.ends[0].cycles, 100u - 40u);
  ASSERT_EQ(open.size(), 3u);
  EXPECT_EQ(open[1].fn_start, 0x2000u);  // a goes on
  EXPECT_EQ(open[2].fn_start, 0x4000u);  // c, the piece's own, is open on top of it
}

TEST(StackJoinTest, AReturnToADeeperFrameEndsEveryFrameAboveItTopFirst) {
  std::vector<BorderFrame> open = MainAB();
  // A return to main's call site of a (longjmp's shape: it skips b's return).
  const JoinOutcome outcome = JoinBorder(&open, {ContinueTop(0x3040), At(Kind::kReturn, 0x1010, 3, 90)}, {});
  ASSERT_TRUE(outcome.holds) << outcome.failed;
  ASSERT_EQ(outcome.ends.size(), 2u);
  EXPECT_EQ(outcome.ends[0].instructions, 90u - 20u);  // b first
  EXPECT_EQ(outcome.ends[1].instructions, 90u - 10u);  // then a
  EXPECT_EQ(outcome.ends[1].output_position, 3u);
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].fn_start, 0x1000u);
}

TEST(StackJoinTest, FramesOpenAtAPiecesEndAreEndedByALaterPiece) {
  std::vector<BorderFrame> open = MainAB();
  // Piece 1 calls d from b and ends inside it; piece 2 returns from d and then from b.
  ASSERT_TRUE(JoinBorder(&open, {ContinueTop(0x3010)}, {Called(0x5000, 0x3030, 40)}).holds);
  const JoinOutcome outcome =
      JoinBorder(&open, {ContinueTop(0x5008), At(Kind::kReturn, 0x3030, 0, 70), At(Kind::kReturn, 0x2020, 4, 80)},
                 {});
  ASSERT_TRUE(outcome.holds) << outcome.failed;
  ASSERT_EQ(outcome.ends.size(), 2u);
  EXPECT_EQ(outcome.ends[0].output_position, 0u);
  EXPECT_EQ(outcome.ends[0].instructions, 70u - 40u);  // d: begun in piece 1
  EXPECT_EQ(outcome.ends[1].output_position, 4u);
  EXPECT_EQ(outcome.ends[1].instructions, 80u - 20u);  // b: begun before piece 1
  EXPECT_EQ(open.size(), 2u);
}

TEST(StackJoinTest, AnEndOfEverythingEndsEachOpenFrameButFoldedOnesWriteNoEnd) {
  std::vector<BorderFrame> open = MainAB();
  open[1].emitted = false;  // a is below the fold: no slice
  const JoinOutcome outcome = JoinBorder(&open, {ContinueTop(0x3000), At(Kind::kEndAll, 0, 9, 100)}, {});
  ASSERT_TRUE(outcome.holds) << outcome.failed;
  ASSERT_EQ(outcome.ends.size(), 2u);
  EXPECT_EQ(outcome.ends[0].instructions, 100u - 20u);  // b
  EXPECT_EQ(outcome.ends[1].instructions, 100u - 0u);   // main
  EXPECT_TRUE(open.empty());
}

TEST(StackJoinTest, APieceStartingOutsideTheOpenTopsFunctionIsReplayed) {
  std::vector<BorderFrame> open = MainAB();
  const JoinOutcome outcome = JoinBorder(&open, {ContinueTop(0x6000)}, {});
  EXPECT_FALSE(outcome.holds);
  EXPECT_NE(outcome.failed.find("outside the open top frame"), std::string::npos) << outcome.failed;
  EXPECT_EQ(open.size(), 3u);  // left for the serial replay
}

TEST(StackJoinTest, APieceStartingInAnotherPartOfTheTopsFunctionContinuesIt) {
  std::vector<BorderFrame> open = MainAB();
  BorderRecord cold = ContinueTop(0x9000);  // b.cold, split off b
  cold.home = 0x3000;
  EXPECT_TRUE(JoinBorder(&open, {cold}, {}).holds);
}

TEST(StackJoinTest, AReturnMatchingNoOpenFrameIsReplayed) {
  std::vector<BorderFrame> open = MainAB();
  const JoinOutcome outcome = JoinBorder(&open, {ContinueTop(0x3040), At(Kind::kReturn, 0x7777, 1, 30)}, {});
  EXPECT_FALSE(outcome.holds);
  EXPECT_TRUE(outcome.ends.empty());
  EXPECT_EQ(open.size(), 3u);
}

TEST(StackJoinTest, AReturnPastEveryOpenFrameIsReplayed) {
  std::vector<BorderFrame> open = MainAB();
  open[0].return_address = 0x500;  // main's caller is not on the stack: it would be inferred
  const JoinOutcome outcome = JoinBorder(&open, {ContinueTop(0x3040), At(Kind::kReturn, 0x500, 1, 30)}, {});
  EXPECT_FALSE(outcome.holds);
  EXPECT_NE(outcome.failed.find("inferred"), std::string::npos) << outcome.failed;
  EXPECT_EQ(open.size(), 3u);
}

TEST(StackJoinTest, AReturnLandingOutsideTheCallersFunctionIsReplayed) {
  std::vector<BorderFrame> open = MainAB();
  open[2].return_address = 0x2100;  // a's range ends at 0x2100: the model would rename a
  const JoinOutcome outcome = JoinBorder(&open, {ContinueTop(0x3040), At(Kind::kReturn, 0x2100, 1, 30)}, {});
  EXPECT_FALSE(outcome.holds);
  EXPECT_EQ(open.size(), 3u);
}

TEST(StackJoinTest, AJoinFailingAfterEndingFramesLeavesTheOpenStackAsItWas) {
  std::vector<BorderFrame> open = MainAB();
  // The return from b matches; the one after it matches nothing: the piece is replayed
  // from the whole stack, b included.
  const JoinOutcome outcome = JoinBorder(
      &open, {ContinueTop(0x3040), At(Kind::kReturn, 0x2020, 1, 30), At(Kind::kReturn, 0x7777, 2, 40)}, {});
  EXPECT_FALSE(outcome.holds);
  EXPECT_TRUE(outcome.ends.empty());
  ASSERT_EQ(open.size(), 3u);
  EXPECT_EQ(open[2].fn_start, 0x3000u);
}

TEST(StackJoinTest, APieceStartingInAFrameWhenNoneIsOpenIsReplayed) {
  std::vector<BorderFrame> open;
  EXPECT_FALSE(JoinBorder(&open, {ContinueTop(0x3040)}, {}).holds);
}

}  // namespace
}  // namespace ptd::decoder
