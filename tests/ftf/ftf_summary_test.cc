// FtfSummarizer: per-thread counts and total/self time per function, worked out by hand.
#include "ftf/ftf_summary.h"

#include <string>

#include "ftf/ftf_writer.h"
#include "ftf_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace ptd::ftf {
namespace {

using ::ptd::ftf::testing::ReaderOfBytes;
using ::testing::HasSubstr;

const FunctionStats* Find(const FtfSummary& summary, const std::string& name) {
  for (const FunctionStats& f : summary.functions.functions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

FtfSummary Summarize(const std::string& bytes) {
  FtfSummarizer summarizer;
  absl::Status read =
      ForEachRecord(*ReaderOfBytes(bytes), [&](const FtfRecord& record) { summarizer.Add(record); });
  EXPECT_TRUE(read.ok()) << read;
  return summarizer.Finish();
}

// main [0,100] calls a [10,40] (which calls b [20,30]) and a again [50,60];
// r [0,50] on another thread recurses into r [10,40].
std::string SampleTrace() {
  std::string bytes;
  auto w = FtfWriter::ToSink(MakeStringSink(&bytes), "memory.ftf");
  w->WriteProcess(1, "app");
  w->WriteThread(1, 2, "main-thread");
  w->WriteThread(1, 3, "worker");
  w->DurationBegin(1, 2, 0, "c", "main");
  w->DurationBegin(1, 2, 10, "c", "a");
  w->DurationBegin(1, 2, 20, "c", "b");
  w->DurationEnd(1, 2, 30, "c", "b");
  w->DurationEnd(1, 2, 40, "c", "a");
  w->DurationBegin(1, 2, 50, "c", "a");
  w->Instant(1, 2, 55, "c", "mark");
  w->DurationEnd(1, 2, 60, "c", "a");
  w->DurationEnd(1, 2, 100, "c", "main");
  w->DurationBegin(1, 3, 0, "c", "r");
  w->DurationBegin(1, 3, 10, "c", "r");
  w->DurationEnd(1, 3, 40, "c", "r");
  w->DurationEnd(1, 3, 50, "c", "r");
  w->DurationBegin(1, 3, 60, "c", "open");  // never ends: closed at the last timestamp
  w->DurationComplete(1, 3, 61, 70, "c", "leaf");
  EXPECT_TRUE(w->Close().ok());
  return bytes;
}

TEST(FtfSummaryTest, TotalAndSelfTimePerFunction) {
  FtfSummary summary = Summarize(SampleTrace());
  const FunctionStats* main = Find(summary, "main");
  const FunctionStats* a = Find(summary, "a");
  const FunctionStats* b = Find(summary, "b");
  const FunctionStats* r = Find(summary, "r");
  ASSERT_TRUE(main && a && b && r);
  EXPECT_EQ(main->calls, 1u);
  EXPECT_EQ(main->total_ns, 100u);
  EXPECT_EQ(main->self_ns, 60u);  // 100 - 30 (a) - 10 (a)
  EXPECT_EQ(a->calls, 2u);
  EXPECT_EQ(a->total_ns, 40u);
  EXPECT_EQ(a->self_ns, 30u);  // (30 - 10) + 10
  EXPECT_EQ(b->total_ns, 10u);
  EXPECT_EQ(b->self_ns, 10u);
  EXPECT_EQ(r->calls, 2u);
  EXPECT_EQ(r->total_ns, 50u);  // the recursive call is not counted twice
  EXPECT_EQ(r->self_ns, 50u);   // 20 outer + 30 inner
  EXPECT_EQ(summary.functions.functions.front().name, "main");  // longest total first
}

TEST(FtfSummaryTest, ThreadsWithNamesCountsAndUnfinishedSlices) {
  FtfSummary summary = Summarize(SampleTrace());
  ASSERT_EQ(summary.threads.size(), 2u);
  const ThreadSummary& main = summary.threads[0];
  EXPECT_EQ(main.tid, 2u);
  EXPECT_EQ(main.name, "main-thread");
  EXPECT_EQ(main.process_name, "app");
  EXPECT_EQ(main.slices, 4u);
  EXPECT_EQ(main.instants, 1u);
  EXPECT_EQ(main.max_depth, 3u);
  EXPECT_EQ(main.unfinished, 0u);
  const ThreadSummary& worker = summary.threads[1];
  EXPECT_EQ(worker.name, "worker");
  EXPECT_EQ(worker.slices, 4u);  // r, r, leaf, open
  EXPECT_EQ(worker.unfinished, 1u);
  EXPECT_EQ(worker.last_ts_ns, 70u);
  const FunctionStats* open = Find(summary, "open");
  ASSERT_NE(open, nullptr);
  EXPECT_EQ(open->total_ns, 10u);  // 60 .. last timestamp 70
  EXPECT_EQ(open->self_ns, 1u);    // minus leaf's 9
}

TEST(FtfSummaryTest, FormatsThreadsAndFunctions) {
  std::string text = FormatFtfSummary(Summarize(SampleTrace()), 2);
  EXPECT_THAT(text, HasSubstr("main-thread (app)"));
  EXPECT_THAT(text, HasSubstr("[1 unfinished]"));
  EXPECT_THAT(text, HasSubstr("top functions by total time:"));
  EXPECT_THAT(text, HasSubstr("top functions by self time:"));
  EXPECT_THAT(text, HasSubstr("  main\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("  b\n")));  // only the top 2 are listed
}

TEST(FtfSummaryTest, ShowsWhereEachFunctionIsDefined) {
  std::string bytes;
  auto w = FtfWriter::ToSink(MakeStringSink(&bytes), "memory.ftf");
  const Arg source[] = {Arg::String("source", "/src/prog.c:12")};
  w->DurationBegin(1, 2, 0, "c", "defined", source);
  w->DurationBegin(1, 2, 10, "c", "unknown");
  w->DurationEnd(1, 2, 20, "c", "unknown");
  w->DurationEnd(1, 2, 30, "c", "defined");
  ASSERT_TRUE(w->Close().ok());
  FtfSummary summary = Summarize(bytes);
  ASSERT_TRUE(Find(summary, "defined") && Find(summary, "unknown"));
  EXPECT_EQ(Find(summary, "defined")->source, "/src/prog.c:12");
  EXPECT_EQ(Find(summary, "unknown")->source, "");
  std::string text = FormatFtfSummary(summary, 10);
  EXPECT_THAT(text, HasSubstr("  defined  (/src/prog.c:12)\n"));
  EXPECT_THAT(text, HasSubstr("  unknown\n"));
  // --json carries it, and reads back.
  absl::StatusOr<FunctionStatsSummary> back = FunctionStatsFromJson(FunctionStatsJson(summary.functions, 0));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->functions.size(), 2u);
  EXPECT_EQ(back->functions[0].source, "/src/prog.c:12");
}

TEST(FtfSummaryTest, SummarizesAFile) {
  ptd::testing::TempDir dir;
  const std::string path = dir.Sub("s.ftf.gz");
  {
    absl::StatusOr<std::unique_ptr<FtfWriter>> writer = FtfWriter::Open(path);
    ASSERT_TRUE(writer.ok());
    (*writer)->DurationBegin(5, 6, 1000, "c", "x");
    (*writer)->DurationEnd(5, 6, 3000, "c", "x");
  }
  absl::StatusOr<FtfSummary> summary = SummarizeFtfFile(path);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->functions.functions.size(), 1u);
  EXPECT_EQ(summary->functions.functions[0].total_ns, 2000u);
  EXPECT_EQ(summary->ticks_per_second, 1'000'000'000u);
}

}  // namespace
}  // namespace ptd::ftf
