#include "decoder/flow/piece_events.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ptd::decoder {
namespace {

void ExpectSame(const FlowEvent& want, const FlowEvent& got, size_t i) {
  SCOPED_TRACE(i);
  EXPECT_EQ(want.kind, got.kind);
  EXPECT_EQ(want.target_known, got.target_known);
  EXPECT_EQ(want.ip, got.ip);
  EXPECT_EQ(want.target, got.target);
  EXPECT_EQ(want.fallthrough, got.fallthrough);
  EXPECT_EQ(want.instructions, got.instructions);
  EXPECT_EQ(want.cycles, got.cycles);
  EXPECT_EQ(want.time, got.time);
  EXPECT_EQ(want.offset, got.offset);
  EXPECT_EQ(want.enable_time, got.enable_time);
  EXPECT_STREQ(want.message, got.message);
  EXPECT_EQ(want.image_tsc, got.image_tsc);
}

std::vector<FlowEvent> ReadAll(const PieceEvents& events) {
  std::vector<FlowEvent> out;
  PieceEvents::Reader reader(events);
  FlowEvent event;
  while (reader.Next(&event)) out.push_back(event);
  return out;
}

// Events with every field sometimes zero, sometimes small, sometimes any 64-bit value.
std::vector<FlowEvent> RandomEvents(size_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  auto value = [&]() -> uint64_t {
    switch (rng() % 4) {
      case 0: return 0;
      case 1: return rng() % 300;
      case 2: return 0x7f0000000000 + rng() % 0x100000;
      default: return rng();
    }
  };
  static const char* const kMessages[] = {"", "", "", "no memory mapped at this address", "bad packet"};
  std::vector<FlowEvent> events(count);
  uint64_t image_tsc = 0;
  for (FlowEvent& e : events) {
    e.kind = static_cast<FlowKind>(rng() % (static_cast<int>(FlowKind::kLostData) + 1));
    e.target_known = rng() % 2 == 0;
    e.ip = value();
    e.target = value();
    // Calls' fallthrough is the next instruction; sometimes none, sometimes anything.
    e.fallthrough = rng() % 3 == 0 ? value() : e.ip + rng() % 16;
    e.instructions = value();
    e.cycles = value();
    e.time = value();
    e.offset = value();
    e.enable_time = value();
    e.message = kMessages[rng() % 5];
    if (rng() % 3 == 0) image_tsc = value();
    e.image_tsc = image_tsc;
  }
  return events;
}

TEST(PieceEventsTest, ReadGivesBackEveryFieldOfEveryEvent) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const std::vector<FlowEvent> want = RandomEvents(500, seed);
    PieceEvents events;
    for (const FlowEvent& e : want) events.push_back(e);
    ASSERT_EQ(events.size(), want.size());
    const std::vector<FlowEvent> got = ReadAll(events);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ExpectSame(want[i], got[i], i);
  }
}

TEST(PieceEventsTest, TruncateToAMarkDropsWhatCameAfterAndRecordsOnFromThere) {
  const std::vector<FlowEvent> want = RandomEvents(300, 7);
  const std::vector<FlowEvent> overlap = RandomEvents(100, 8);
  PieceEvents events;
  for (size_t i = 0; i < 200; ++i) events.push_back(want[i]);
  const PieceEvents::Mark mark = events.mark();
  for (const FlowEvent& e : overlap) events.push_back(e);  // looked at past the stop, then dropped
  events.TruncateTo(mark);
  EXPECT_EQ(events.size(), 200u);
  for (size_t i = 200; i < want.size(); ++i) events.push_back(want[i]);
  const std::vector<FlowEvent> got = ReadAll(events);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ExpectSame(want[i], got[i], i);
}

TEST(PieceEventsTest, CommonEventsTakeFiveWords) {
  // What most of a trace is made of: calls and returns with their instruction size, no
  // cycles, and the image time of the event before.
  PieceEvents events;
  FlowEvent call;
  call.kind = FlowKind::kCall;
  call.ip = 0x7f1234560000;
  call.target = 0x7f1234561000;
  call.fallthrough = call.ip + 5;
  call.instructions = 123456;
  call.time = 77;
  for (int i = 0; i < 1000; ++i) {
    call.ip += 16;
    call.fallthrough += 16;
    events.push_back(call);
  }
  EXPECT_EQ(events.bytes(), 1000u * 5 * sizeof(uint64_t));
  EXPECT_LT(events.bytes(), 1000u * sizeof(FlowEvent) * 6 / 10);
}

TEST(PieceEventsTest, MovedFromListIsEmptyAndReusable) {
  const std::vector<FlowEvent> want = RandomEvents(50, 3);
  PieceEvents a;
  for (const FlowEvent& e : want) a.push_back(e);
  PieceEvents b = std::move(a);
  EXPECT_EQ(b.size(), want.size());
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is specified empty
  EXPECT_EQ(a.capacity(), 0u);
  for (const FlowEvent& e : want) a.push_back(e);
  const std::vector<FlowEvent> got = ReadAll(a);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ExpectSame(want[i], got[i], i);
}

}  // namespace
}  // namespace ptd::decoder
