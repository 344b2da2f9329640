// A test harness using ptrace-direct as an installed package: records counted_calls with
// whatever backend this machine has (Intel PT, else Valgrind, else ptrace) and asserts on
// what ran, from the program's source.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ptd/decoder.h"
#include "ptd/recorder.h"
#include "ptd/summary_diff.h"

namespace {

TEST(HarnessTest, RecordsTheProgramAndCountsItsCalls) {
  ptd::RecorderConfig config;
  config.command = {COUNTED_CALLS_PATH};
  config.snapshot = false;  // full trace: every call, not only the newest ones
  ptd::Recorder recorder(config);
  absl::Status started = recorder.Start();
  ASSERT_TRUE(started.ok()) << started;
  std::printf("backend: %s (%s)\n", ptd::BackendName(recorder.backend()), recorder.backend_choice().c_str());

  absl::StatusOr<int> exit_code = recorder.Wait();
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 3);  // counted_calls computed the right sum
  const std::string trace = ::testing::TempDir() + "counted_calls.trace";
  absl::Status written = recorder.WriteTo(trace, /*force=*/true);
  ASSERT_TRUE(written.ok()) << written;

  absl::StatusOr<ptd::TraceSummary> summary = ptd::DecodeSummary(trace);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->totals.errors, 0u);
  EXPECT_EQ(summary->totals.threads, 1u);
  ASSERT_TRUE(summary->functions.count("main") && summary->functions.count("checksum") &&
              summary->functions.count("row") && summary->functions.count("cell"));
  EXPECT_EQ(summary->functions.at("main").calls, 1u);
  EXPECT_EQ(summary->functions.at("checksum").calls, 1u);
  EXPECT_EQ(summary->functions.at("row").calls, 10u);
  EXPECT_EQ(summary->functions.at("cell").calls, 40u);
  // row's own loop ran, and its callees are counted in its inclusive figure only.
  const ptd::FunctionSummary& row = summary->functions.at("row");
  const ptd::FunctionSummary& cell = summary->functions.at("cell");
  EXPECT_GT(row.self_instructions, 0u);
  EXPECT_EQ(row.inclusive_instructions, row.self_instructions + cell.inclusive_instructions);
  EXPECT_EQ(cell.self_instructions, cell.inclusive_instructions);  // a leaf
  // The same per thread: the program has one.
  ASSERT_EQ(summary->threads.size(), 1u);
  EXPECT_EQ(summary->threads.begin()->second.functions.at("cell").calls, 40u);

  // A regression gate against the baseline kept next to this file (calls only: they are
  // the same on every machine; instruction counts depend on the compiler and libc, so a
  // project stores those from its own CI machine, with ptd::SaveSummary).
  const std::string source = __FILE__;
  const std::string baseline_path = source.substr(0, source.rfind('/') + 1) + "counted_calls.baseline.json";
  absl::StatusOr<ptd::TraceSummary> baseline = ptd::LoadSummary(baseline_path);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  absl::Status gate = ptd::CheckNoRegression(*baseline, *summary, {"checksum:calls>+0", "row:calls>+0", "cell:calls>+0"});
  EXPECT_TRUE(gate.ok()) << gate << "\n" << ptd::Diff(*baseline, *summary).Table(10);
}

}  // namespace
