// DetailFilterSink (`decode --min-duration`, `--max-depth`): which slices pass, in
// which order, and what is counted as dropped.
#include "decoder/detail_filter.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/decoder/recording_sink.h"

namespace ptd::decoder {
namespace {

using ::testing::ElementsAre;

SliceCounts Insns(uint64_t n) {
  SliceCounts c;
  c.instructions = n;
  return c;
}

// main [0,100] { a [10,12], b [20,60] { c [30,31], d [40,55] } }, e [100,101].
void Feed(SliceSink* sink) {
  sink->Begin(0, "main");
  sink->Begin(10, "a");
  sink->End(12, Insns(2));
  sink->Begin(20, "b");
  sink->Begin(30, "c");
  sink->End(31, Insns(1));
  sink->Begin(40, "d");
  sink->End(55, Insns(15));
  sink->End(60, Insns(40));
  sink->End(100, Insns(100));
  sink->Begin(100, "e");
  sink->End(101, Insns(1));
}

TEST(DetailFilterTest, MinDurationDropsShortSlicesAndKeepsCounts) {
  testing::RecordingSink out;
  DetailOptions options;
  options.min_duration = 10;
  DetailFilterSink filter(&out, options);
  Feed(&filter);
  EXPECT_THAT(out.lines(), ElementsAre("B main", "B b", "B d", "E d i=15", "E b i=40", "E main i=100"));
  EXPECT_FALSE(out.out_of_order());
  EXPECT_FALSE(out.unbalanced());
  EXPECT_EQ(out.open(), 0u);
  EXPECT_EQ(filter.stats()[Stat::kDroppedShort], 3u);  // a, c, e
  EXPECT_EQ(filter.stats()[Stat::kDetailKept], 3u);
  EXPECT_EQ(filter.stats()[Stat::kDroppedDeep], 0u);
}

TEST(DetailFilterTest, HeldParentsAreWrittenBeforeALongChild) {
  // The parent's Begin is held until the child turns out long: both written, in order.
  testing::RecordingSink out;
  DetailOptions options;
  options.min_duration = 50;
  DetailFilterSink filter(&out, options);
  filter.Begin(0, "p");
  filter.Begin(1, "q");
  filter.Begin(2, "r");
  filter.End(70, Insns(3));
  filter.End(71, Insns(4));
  filter.End(72, Insns(5));
  EXPECT_THAT(out.lines(), ElementsAre("B p", "B q", "B r", "E r i=3", "E q i=4", "E p i=5"));
  EXPECT_FALSE(out.out_of_order());
}

TEST(DetailFilterTest, MaxDepthDropsDeepSlices) {
  testing::RecordingSink out;
  DetailOptions options;
  options.max_depth = 2;
  DetailFilterSink filter(&out, options);
  Feed(&filter);
  EXPECT_THAT(out.Names(), ElementsAre("B main", "B a", "E a", "B b", "E b", "E main", "B e", "E e"));
  EXPECT_EQ(filter.stats()[Stat::kDroppedDeep], 2u);  // c, d
  EXPECT_EQ(out.max_depth(), 2u);
}

TEST(DetailFilterTest, InstantKeepsTheSlicesAroundIt) {
  testing::RecordingSink out;
  DetailOptions options;
  options.min_duration = 1000;
  DetailFilterSink filter(&out, options);
  filter.Begin(0, "outer");
  filter.Begin(5, "inner");
  filter.Instant(6, "trace overflow", "");
  filter.End(7, Insns(1));
  filter.End(8, Insns(2));
  filter.Begin(9, "short");
  filter.End(10, Insns(1));
  EXPECT_THAT(out.Names(), ElementsAre("B outer", "B inner", "I trace overflow", "E inner", "E outer"));
  EXPECT_EQ(filter.stats()[Stat::kDroppedShort], 1u);
}

TEST(DetailFilterTest, FullDetailFromATime) {
  testing::RecordingSink out;
  DetailOptions options;
  options.min_duration = 10;
  options.full_detail_from = 35;
  DetailFilterSink filter(&out, options);
  Feed(&filter);
  // a and c began before 35 and are short: dropped; e began after: kept.
  EXPECT_THAT(out.Names(), ElementsAre("B main", "B b", "B d", "E d", "E b", "E main", "B e", "E e"));
  EXPECT_EQ(filter.stats()[Stat::kDroppedShort], 2u);
}

}  // namespace
}  // namespace ptd::decoder
