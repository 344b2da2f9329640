// The stats registry (decoder/stats.h): merge rules, per-piece deltas, and the
// `--stats-json` text every key ends up in.
#include "decoder/stats.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "decoder/trace_decoder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ptd::decoder {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatsTest, MergeAddsCountsAndKeepsTheDeepestStack) {
  Stats a;
  a.Add(Stat::kCalls, 3);
  a.RaiseTo(Stat::kMaxDepth, 7);
  Stats b;
  b.Add(Stat::kCalls, 4);
  b.Add(Stat::kErrors);
  b.RaiseTo(Stat::kMaxDepth, 5);
  a.Merge(b);
  EXPECT_EQ(a[Stat::kCalls], 7u);
  EXPECT_EQ(a[Stat::kErrors], 1u);
  EXPECT_EQ(a[Stat::kMaxDepth], 7u);
}

TEST(StatsTest, SinceCountsOnlyWhatCameAfter) {
  Stats stats;
  stats.Add(Stat::kBlocks, 10);
  const Stats before = stats;
  stats.Add(Stat::kBlocks, 5);
  stats.Add(Stat::kSyncs, 2);
  Stats delta = stats.Since(before);
  EXPECT_EQ(delta[Stat::kBlocks], 5u);
  EXPECT_EQ(delta[Stat::kSyncs], 2u);
  EXPECT_EQ(delta[Stat::kCalls], 0u);
}

TEST(StatsTest, KeysAreDistinctAndEveryOneIsInTheJson) {
  DecodeResult result;
  result.has_cycles = true;
  std::set<std::string> keys;
  for (size_t i = 0; i < kStatCount; ++i) {
    const Stat stat = static_cast<Stat>(i);
    result.stats.Set(stat, 100 + i);
    keys.insert(std::string(Stats::Key(stat)));
  }
  EXPECT_EQ(keys.size(), kStatCount);
  result.seconds = 1.5;
  const std::string json = DecodeStatsJson(result);
  for (size_t i = 0; i < kStatCount; ++i) {
    const Stat stat = static_cast<Stat>(i);
    EXPECT_THAT(json, HasSubstr(absl::StrCat("\"", Stats::Key(stat), "\": ", 100 + i))) << json;
  }
  // "seconds" right after "segments", where it has always been.
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"segments\": ", result.stats[Stat::kSegments], ", \"seconds\": 1.500000")));
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.substr(json.size() - 2), "}\n");
}

TEST(StatsTest, EachPiecesCostIsListedInOrder) {
  DecodeResult result;
  EXPECT_THAT(DecodeStatsJson(result), HasSubstr("\"piece_cpu_ns_each\": []"));
  result.pieces = {{4096, 700, 30}, {8192, 900, 50}};
  const std::string json = DecodeStatsJson(result);
  EXPECT_THAT(json, HasSubstr("\"piece_bytes_each\": [4096, 8192]"));
  EXPECT_THAT(json, HasSubstr("\"piece_cpu_ns_each\": [700, 900]"));
  EXPECT_THAT(json, HasSubstr("\"piece_serial_cpu_ns_each\": [30, 50]"));
  EXPECT_EQ(json.substr(json.size() - 2), "}\n");
}

TEST(StatsTest, CyclesOnlyWhenSomeStreamHadCyc) {
  DecodeResult result;
  result.stats.Add(Stat::kCycles, 0);
  EXPECT_THAT(DecodeStatsJson(result), Not(HasSubstr("\"cycles\"")));
  result.has_cycles = true;
  EXPECT_THAT(DecodeStatsJson(result), HasSubstr("\"cycles\": 0"));
}

}  // namespace
}  // namespace ptd::decoder
