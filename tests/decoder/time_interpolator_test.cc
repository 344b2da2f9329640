#include "decoder/flow/time_interpolator.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ptd::decoder {
namespace {

using ::testing::ElementsAre;

class TimesSeen : public FlowConsumer {
 public:
  void OnFlow(const FlowEvent& event) override { times.push_back(event.time); }
  std::vector<uint64_t> times;
};

// Identity conversion: a TSC is a nanosecond.
class TimeInterpolatorTest : public ::testing::Test {
 protected:
  // An event at `instructions`, its time sampled now.
  void EventAt(uint64_t instructions) {
    FlowEvent event;
    event.instructions = instructions;
    event.time = clock_.Sample(instructions);
    clock_.Deliver(event);
  }

  TimesSeen seen_;
  TimeInterpolator clock_{TimeAxis::kTime, TimeConversion{}, &seen_};
};

TEST_F(TimeInterpolatorTest, EventsBetweenTwoUpdatesArePlacedByInstructionsBetweenThem) {
  clock_.Update(1000, 0);
  clock_.Update(1100, 100);  // 1 ns per instruction
  EventAt(110);
  EventAt(150);
  EXPECT_TRUE(seen_.times.empty());  // their time needs the next update
  clock_.Update(6150, 150);          // these 50 instructions took 5050 ns (a stall)
  // Not extrapolated at the interval before's rate (1 ns per instruction: 1110, 1150).
  EXPECT_THAT(seen_.times, ElementsAre(2110, 6150));
}

TEST_F(TimeInterpolatorTest, AGapWithoutInstructionsBelongsToWhatFollowsIt) {
  clock_.Update(1000, 0);
  EventAt(50);              // the syscall: its sample is taken before the TIP.PGD's update
  clock_.Update(1050, 50);  // TIP.PGD
  EventAt(50);              // the disable, at the gap's start
  clock_.Update(2050, 50);  // TIP.PGE, a 1000 ns system call later
  EventAt(50);              // the enable
  clock_.Update(2060, 60);
  EXPECT_THAT(seen_.times, ElementsAre(1050, 1050, 2050));
}

TEST_F(TimeInterpolatorTest, AnUpdateBeforeThePreviousOneCountsAsThePreviousOne) {
  clock_.Update(1000, 0);
  clock_.Update(2000, 100);
  EventAt(120);
  clock_.Update(1900, 140);  // a CYC estimate overshot the next TSC
  EventAt(150);
  clock_.Update(2100, 200);
  EXPECT_THAT(seen_.times, ElementsAre(2000, 2016));
}

TEST_F(TimeInterpolatorTest, TheChunksTailRunsOnAtTheLastRate) {
  clock_.Update(1000, 0);
  clock_.Update(1200, 100);  // 2 ns per instruction
  EventAt(130);
  clock_.Finish();
  EXPECT_THAT(seen_.times, ElementsAre(1260));
  EXPECT_EQ(clock_.last(), 1260u);
}

TEST_F(TimeInterpolatorTest, AKeptTicketKeepsItsTimeAfterTheEventsBeforeItWentOn) {
  clock_.Update(1000, 0);
  FlowEvent pending;
  pending.time = clock_.Sample(40);  // a branch whose event is made later
  EventAt(40);
  clock_.Update(1080, 40, pending.time);
  EXPECT_THAT(seen_.times, ElementsAre(1080));
  clock_.Deliver(pending);
  EXPECT_THAT(seen_.times, ElementsAre(1080, 1080));
}

TEST(TimeInterpolatorInstructionAxisTest, TimeIsTheInstructionCountAndEventsGoOnAtOnce) {
  TimesSeen seen;
  TimeInterpolator clock(TimeAxis::kInstructions, TimeConversion{}, &seen);
  FlowEvent event;
  event.time = clock.Now(42);
  clock.Deliver(event);
  clock.Update(5000, 42);  // ignored off the time axis
  EXPECT_THAT(seen.times, ElementsAre(42));
}

}  // namespace
}  // namespace ptd::decoder
