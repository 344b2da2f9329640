// FunctionStatsBuilder: calls, inclusive/self time and instructions, percentiles, the
// decade histogram and the slowest calls, worked out by hand.
#include "ftf/function_stats.h"

#include <initializer_list>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ptd::ftf {
namespace {

using ::testing::HasSubstr;

const FunctionStats& Find(const FunctionStatsSummary& summary, const std::string& name) {
  for (const FunctionStats& f : summary.functions) {
    if (f.name == name) return f;
  }
  static const FunctionStats kNone;
  ADD_FAILURE() << "no function " << name;
  return kNone;
}

TEST(FunctionStatsTest, InclusiveAndSelfTimeAndInstructions) {
  FunctionStatsBuilder b;
  // main [0,100] i=1000 calls f [10,30] i=200 (which calls g [15,20] i=50) and f [40,50] i=100.
  b.Begin(1, 2, 0, "main");
  b.Begin(1, 2, 10, "f");
  b.Begin(1, 2, 15, "g");
  b.End(1, 2, 20, 50);
  b.End(1, 2, 30, 200);
  b.Begin(1, 2, 40, "f");
  b.End(1, 2, 50, 100);
  b.End(1, 2, 100, 1000);
  FunctionStatsSummary s = b.Finish();
  ASSERT_EQ(s.functions.size(), 3u);
  EXPECT_EQ(s.functions[0].name, "main");
  const FunctionStats& main = Find(s, "main");
  EXPECT_EQ(main.calls, 1u);
  EXPECT_EQ(main.total_ns, 100u);
  EXPECT_EQ(main.self_ns, 70u);
  EXPECT_TRUE(main.has_instructions);
  EXPECT_EQ(main.total_instructions, 1000u);
  EXPECT_EQ(main.self_instructions, 700u);
  const FunctionStats& f = Find(s, "f");
  EXPECT_EQ(f.calls, 2u);
  EXPECT_EQ(f.total_ns, 30u);
  EXPECT_EQ(f.self_ns, 25u);
  EXPECT_EQ(f.total_instructions, 300u);
  EXPECT_EQ(f.self_instructions, 250u);
  EXPECT_EQ(f.max_ns, 20u);
}

TEST(FunctionStatsTest, RecursionCountsTotalOnceAndLatencyPerCall) {
  FunctionStatsBuilder b;
  b.Begin(1, 3, 0, "r");
  b.Begin(1, 3, 10, "r");
  b.End(1, 3, 40, std::nullopt);
  b.End(1, 3, 50, std::nullopt);
  FunctionStatsSummary s = b.Finish();
  const FunctionStats& r = Find(s, "r");
  EXPECT_EQ(r.calls, 2u);
  EXPECT_EQ(r.total_ns, 50u);
  EXPECT_EQ(r.self_ns, 50u);
  EXPECT_EQ(r.max_ns, 50u);
  EXPECT_FALSE(r.has_instructions);  // the slices carried no count
}

TEST(FunctionStatsTest, PercentilesAndHistogram) {
  FunctionStatsBuilder b;
  // 100 calls of 1..100 ns (exact region below 32, log-linear above), then one of 5 ms.
  uint64_t t = 0;
  for (uint64_t d = 1; d <= 100; ++d) {
    b.Begin(1, 1, t, "f");
    b.End(1, 1, t + d, std::nullopt);
    t += d + 1;
  }
  b.Begin(1, 1, t, "f");
  b.End(1, 1, t + 5'000'000, std::nullopt);
  FunctionStatsSummary s = b.Finish();
  const FunctionStats& f = Find(s, "f");
  EXPECT_EQ(f.calls, 101u);
  // Nearest rank: p50 is the 51st value (51), p90 the 91st (91), p99 the 100th (100);
  // above 32 a percentile is the middle of its bucket, within 1/32.
  EXPECT_NEAR(static_cast<double>(f.p50_ns), 51.0, 51.0 / 32);
  EXPECT_NEAR(static_cast<double>(f.p90_ns), 91.0, 91.0 / 32);
  EXPECT_NEAR(static_cast<double>(f.p99_ns), 100.0, 100.0 / 32);
  EXPECT_EQ(f.min_ns, 1u);
  EXPECT_EQ(f.max_ns, 5'000'000u);
  // 99 calls under 100 ns, 1 of 100 ns, 1 of 5 ms (the 1-10 ms decade).
  EXPECT_EQ(f.histogram[0], 99u);
  EXPECT_EQ(f.histogram[1], 1u);
  EXPECT_EQ(f.histogram[5], 1u);
}

// The stats of one function `f` called once for each of `durations` (ns).
FunctionStats StatsOfCalls(std::initializer_list<uint64_t> durations) {
  FunctionStatsBuilder b;
  for (uint64_t d : durations) {
    b.Begin(1, 1, 100, "f");
    b.End(1, 1, 100 + d, std::nullopt);
  }
  return Find(b.Finish(), "f");
}

TEST(FunctionStatsTest, SmallValuesAreExact) {
  const FunctionStats f = StatsOfCalls({3, 7, 7, 9, 20});
  EXPECT_EQ(f.p50_ns, 7u);
  EXPECT_EQ(f.p90_ns, 20u);
  EXPECT_EQ(f.p99_ns, 20u);
}

TEST(FunctionStatsTest, OneCallHasExactPercentiles) {
  const FunctionStats f = StatsOfCalls({4'645'000'123});
  EXPECT_EQ(f.p50_ns, 4'645'000'123u);
  EXPECT_EQ(f.p99_ns, 4'645'000'123u);
}

TEST(FunctionStatsTest, SlowestCallsOfOneFunction) {
  FunctionStatsOptions options;
  options.slowest_of = "f";
  options.slowest_count = 3;
  FunctionStatsBuilder b(options);
  const uint64_t durations[] = {5, 50, 7, 40, 1, 60, 2};
  uint64_t t = 1000;
  for (uint64_t d : durations) {
    b.Begin(1, 9, t, "f");
    b.Begin(1, 9, t, "g");  // another function's calls do not count
    b.End(1, 9, t + d + 100, std::nullopt);
    b.End(1, 9, t + d + 100, 7);
    t += 1000;
  }
  FunctionStatsSummary s = b.Finish();
  EXPECT_EQ(s.slowest_of, "f");
  ASSERT_EQ(s.slowest.size(), 3u);
  EXPECT_EQ(s.slowest[0].duration_ns, 160u);
  EXPECT_EQ(s.slowest[0].start_ns, 6000u);
  EXPECT_EQ(s.slowest[0].tid, 9u);
  EXPECT_EQ(s.slowest[0].instructions, 7u);
  EXPECT_EQ(s.slowest[1].duration_ns, 150u);
  EXPECT_EQ(s.slowest[1].start_ns, 2000u);
  EXPECT_EQ(s.slowest[2].duration_ns, 140u);
  std::string text = FormatFunctionStats(s, 10);
  EXPECT_THAT(text, HasSubstr("slowest calls of f:"));
  std::string json = FunctionStatsJson(s, 0);
  EXPECT_THAT(json, HasSubstr("\"function\": \"f\""));
  EXPECT_THAT(json, HasSubstr("\"start_ns\": 6000"));
  EXPECT_THAT(json, HasSubstr("\"p99_ns\""));
}

TEST(FunctionStatsTest, OpenSlicesCloseAtTheThreadsLastTime) {
  FunctionStatsBuilder b;
  b.Begin(1, 1, 0, "outer");
  b.Begin(1, 1, 10, "inner");
  b.End(1, 1, 30, 5);
  FunctionStatsSummary s = b.Finish();
  EXPECT_EQ(Find(s, "outer").total_ns, 30u);
  EXPECT_EQ(Find(s, "outer").self_ns, 10u);
}

}  // namespace
}  // namespace ptd::ftf
