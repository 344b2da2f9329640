// The decode API (ptd/decoder.h) on a recording made through ptd::Recorder: exact call
// counts from the recorded program's source, the sink's event order, options, filters,
// FTF output and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "common/file_util.h"
#include "ptd/decoder.h"
#include "ptd/recorder.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;

class DecodeApiTest : public ::testing::Test {
 protected:
  // One recording of counted_calls (ptrace backend: every machine) for the whole suite.
  static void SetUpTestSuite() {
    dir_ = new ptd::testing::TempDir();
    RecorderConfig config;
    config.backend = Backend::kPtrace;
    config.command = {PTD_COUNTED_CALLS};
    config.snapshot = false;
    Recorder recorder(config);
    ASSERT_TRUE(recorder.Start().ok());
    ASSERT_EQ(*recorder.Wait(), 3);
    ASSERT_TRUE(recorder.WriteTo(Trace()).ok());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string Trace() { return dir_->Sub("counted_calls.trace"); }

  static ptd::testing::TempDir* dir_;
};
ptd::testing::TempDir* DecodeApiTest::dir_ = nullptr;

TEST_F(DecodeApiTest, SummaryHasTheCallCountsOfTheSource) {
  absl::StatusOr<TraceSummary> summary = DecodeSummary(Trace());
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->totals.errors, 0u);
  EXPECT_EQ(summary->totals.threads, 1u);
  EXPECT_TRUE(summary->issues.empty());
  EXPECT_GT(summary->totals.instructions, 0u);
  const std::map<std::string, FunctionSummary>& f = summary->functions;
  ASSERT_TRUE(f.count("main") && f.count("checksum") && f.count("row") && f.count("cell"));
  EXPECT_EQ(f.at("main").calls, 1u);
  EXPECT_EQ(f.at("checksum").calls, 1u);
  EXPECT_EQ(f.at("row").calls, 10u);
  EXPECT_EQ(f.at("cell").calls, 40u);
  // Inclusive = self + callees: checksum's callees are the rows, row's the cells.
  EXPECT_EQ(f.at("cell").self_instructions, f.at("cell").inclusive_instructions);
  EXPECT_EQ(f.at("row").inclusive_instructions, f.at("row").self_instructions + f.at("cell").inclusive_instructions);
  EXPECT_EQ(f.at("checksum").inclusive_instructions,
            f.at("checksum").self_instructions + f.at("row").inclusive_instructions);
  // Every cell call runs the same instructions.
  EXPECT_EQ(f.at("cell").inclusive_instructions % 40, 0u);
  EXPECT_GE(f.at("row").inclusive_time, f.at("row").self_time);
  EXPECT_GE(f.at("checksum").inclusive_time, f.at("row").inclusive_time);
  ASSERT_EQ(summary->threads.size(), 1u);
  const ThreadSummary& thread = summary->threads.begin()->second;
  EXPECT_EQ(thread.tid, thread.pid);
  EXPECT_EQ(thread.name, "ptd-counted-cal");  // the kernel's comm: 15 characters
  EXPECT_EQ(thread.functions.at("cell").calls, 40u);
  EXPECT_EQ(thread.functions.at("row").inclusive_instructions, f.at("row").inclusive_instructions);
}

TEST_F(DecodeApiTest, OptionsGiveTheSameCounts) {
  DecodeOptions insn;
  insn.decoder = DecodeOptions::Decoder::kInsn;
  insn.jobs = 2;
  insn.time_axis = DecodeOptions::TimeAxis::kInstructions;
  absl::StatusOr<TraceSummary> a = DecodeSummary(Trace());
  absl::StatusOr<TraceSummary> b = DecodeSummary(Trace(), insn);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const char* name : {"main", "checksum", "row", "cell"}) {
    EXPECT_EQ(a->functions.at(name).calls, b->functions.at(name).calls) << name;
    EXPECT_EQ(a->functions.at(name).inclusive_instructions, b->functions.at(name).inclusive_instructions) << name;
  }
  // On the instruction axis a slice lasts as many units as it ran instructions.
  EXPECT_EQ(b->functions.at("cell").inclusive_time, b->functions.at("cell").inclusive_instructions);
}

TEST_F(DecodeApiTest, FiltersByThreadAndWindow) {
  absl::StatusOr<TraceSummary> all = DecodeSummary(Trace());
  ASSERT_TRUE(all.ok());
  const int tid = all->threads.begin()->first;
  DecodeOptions options;
  options.tid = tid;
  absl::StatusOr<TraceSummary> same = DecodeSummary(Trace(), options);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->functions.at("cell").calls, 40u);
  // A thread the trace does not hold is an error that names it, not an empty summary.
  options.tid = tid + 100000;
  absl::StatusOr<TraceSummary> none = DecodeSummary(Trace(), options);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(absl::IsNotFound(none.status())) << none.status();
  EXPECT_NE(none.status().message().find("no such thread"), std::string_view::npos) << none.status();

  // Instruction axis: the window [0, first half) holds some of the cells, not all.
  DecodeOptions window;
  window.time_axis = DecodeOptions::TimeAxis::kInstructions;
  absl::StatusOr<TraceSummary> whole = DecodeSummary(Trace(), window);
  ASSERT_TRUE(whole.ok());
  window.window_end = whole->totals.instructions / 2;
  absl::StatusOr<TraceSummary> half = DecodeSummary(Trace(), window);
  ASSERT_TRUE(half.ok());
  const uint64_t cells = half->functions.count("cell") ? half->functions.at("cell").calls : 0;
  EXPECT_LT(cells, 40u);
}

// Checks the nesting contract and counts what arrives.
class CheckingSink : public DecodeSink {
 public:
  void Thread(int, int tid, std::string_view, std::string_view) override { threads.push_back(tid); }
  void SliceBegin(int, uint64_t time, std::string_view function) override {
    EXPECT_GE(time, last_time);
    last_time = time;
    open.push_back(std::string(function));
    ++begins[std::string(function)];
  }
  void SliceEnd(int, uint64_t time, uint64_t, uint64_t) override {
    ASSERT_FALSE(open.empty()) << "SliceEnd without SliceBegin";
    EXPECT_GE(time, last_time);
    last_time = time;
    open.pop_back();
  }
  std::vector<int> threads;
  std::vector<std::string> open;
  std::map<std::string, int> begins;
  uint64_t last_time = 0;
};

TEST_F(DecodeApiTest, SinkGetsEverySliceNested) {
  CheckingSink sink;
  absl::StatusOr<DecodeTotals> totals = DecodeToSink(Trace(), sink);
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(sink.threads.size(), 1u);
  EXPECT_TRUE(sink.open.empty());  // every slice closed
  EXPECT_EQ(sink.begins["cell"], 40);
  EXPECT_EQ(sink.begins["row"], 10);
  EXPECT_EQ(totals->errors, 0u);
}

TEST_F(DecodeApiTest, FtfFileIsWritten) {
  ptd::testing::TempDir out;
  absl::StatusOr<DecodeTotals> totals = DecodeToFtf(Trace(), out.Sub("t.ftf"));
  ASSERT_TRUE(totals.ok()) << totals.status();
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(out.Sub("t.ftf"));
  ASSERT_TRUE(bytes.ok());
  EXPECT_GT(bytes->size(), 100u);
  EXPECT_GT(totals->calls, 50u);
}

TEST(DecodeApiErrorsTest, BadInputIsAStatusNamingIt) {
  absl::StatusOr<TraceSummary> missing = DecodeSummary("/nonexistent/x.trace");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/x.trace"));
  DecodeOptions options;
  options.jobs = -1;
  EXPECT_THAT(DecodeSummary("/nonexistent/x.trace", options).status().message(), HasSubstr("DecodeOptions.jobs"));
  options = {};
  options.window_begin = 10;
  options.window_end = 5;
  EXPECT_EQ(DecodeSummary("/nonexistent/x.trace", options).status().code(), absl::StatusCode::kInvalidArgument);
  ptd::testing::TempDir out;
  EXPECT_FALSE(DecodeToFtf("/nonexistent/x.trace", out.Sub("t.ftf")).ok());
  EXPECT_FALSE(PathExists(out.Sub("t.ftf")));
}

}  // namespace
}  // namespace ptd
