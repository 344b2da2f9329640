// DetailFilterSink (`decode --min-duration`, `--max-depth`): which slices pass, in
// which order, and what is counted as dropped.
#include "decoder/output/detail_filter.h"

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

// A DetailFilterSink with `options` in front of a sink recording what passes.
struct FilterUnderTest {
  explicit FilterUnderTest(const DetailOptions& options) : filter(&out, options) {}
  testing::RecordingSink out;
  DetailFilterSink filter;
};

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
  FilterUnderTest t({.min_duration = 10});
  Feed(&t.filter);
  EXPECT_THAT(t.out.lines(), ElementsAre("B main", "B b", "B d", "E d i=15", "E b i=40", "E main i=100"));
  EXPECT_FALSE(t.out.out_of_order());
  EXPECT_FALSE(t.out.unbalanced());
  EXPECT_EQ(t.out.open(), 0u);
  EXPECT_EQ(t.filter.stats()[Stat::kDroppedShort], 3u);  // a, c, e
  EXPECT_EQ(t.filter.stats()[Stat::kDetailKept], 3u);
  EXPECT_EQ(t.filter.stats()[Stat::kDroppedDeep], 0u);
}

TEST(DetailFilterTest, HeldParentsAreWrittenBeforeALongChild) {
  // The parent's Begin is held until the child turns out long: both written, in order.
  FilterUnderTest t({.min_duration = 50});
  t.filter.Begin(0, "p");
  t.filter.Begin(1, "q");
  t.filter.Begin(2, "r");
  t.filter.End(70, Insns(3));
  t.filter.End(71, Insns(4));
  t.filter.End(72, Insns(5));
  EXPECT_THAT(t.out.lines(), ElementsAre("B p", "B q", "B r", "E r i=3", "E q i=4", "E p i=5"));
  EXPECT_FALSE(t.out.out_of_order());
}

TEST(DetailFilterTest, MaxDepthDropsDeepSlices) {
  FilterUnderTest t({.max_depth = 2});
  Feed(&t.filter);
  EXPECT_THAT(t.out.Names(), ElementsAre("B main", "B a", "E a", "B b", "E b", "E main", "B e", "E e"));
  EXPECT_EQ(t.filter.stats()[Stat::kDroppedDeep], 2u);  // c, d
  EXPECT_EQ(t.out.max_depth(), 2u);
}

TEST(DetailFilterTest, InstantKeepsTheSlicesAroundIt) {
  FilterUnderTest t({.min_duration = 1000});
  t.filter.Begin(0, "outer");
  t.filter.Begin(5, "inner");
  t.filter.Instant(6, "trace overflow", "");
  t.filter.End(7, Insns(1));
  t.filter.End(8, Insns(2));
  t.filter.Begin(9, "short");
  t.filter.End(10, Insns(1));
  EXPECT_THAT(t.out.Names(), ElementsAre("B outer", "B inner", "I trace overflow", "E inner", "E outer"));
  EXPECT_EQ(t.filter.stats()[Stat::kDroppedShort], 1u);
}

TEST(DetailFilterTest, FullDetailFromATime) {
  FilterUnderTest t({.min_duration = 10, .full_detail_from = 35});
  Feed(&t.filter);
  // a and c began before 35 and are short: dropped; e began after: kept.
  EXPECT_THAT(t.out.Names(), ElementsAre("B main", "B b", "B d", "E d", "E b", "E main", "B e", "E e"));
  EXPECT_EQ(t.filter.stats()[Stat::kDroppedShort], 2u);
}

}  // namespace
}  // namespace ptd::decoder
