// `ptrace-direct ftf-dump`: records as text, --summary, --check, errors and exit codes.
#include <string>

#include "ftf/ftf_writer.h"
#include "ftf_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace ptd::ftf {
namespace {

using ::ptd::testing::CommandResult;
using ::ptd::testing::RunCommand;
using ::testing::HasSubstr;
using ::testing::Not;

void WriteTrace(const std::string& path, bool balanced) {
  absl::Status written = testing::WriteFtfFile(path, [&](FtfWriter& w) {
    w.WriteProcess(40, "demo");
    w.WriteThread(40, 41, "demo-main");
    w.DurationBegin(40, 41, 1000, "fn", "main");
    w.DurationBegin(40, 41, 1100, "fn", "compute");
    const Arg n = Arg::Uint64("instructions", 1234);
    w.DurationEnd(40, 41, 1900, "fn", "compute", absl::MakeConstSpan(&n, 1));
    if (balanced) w.DurationEnd(40, 41, 2000, "fn", "main");
  });
  ASSERT_TRUE(written.ok()) << written;
}

TEST(FtfDumpCliTest, PrintsRecordsThenSummary) {
  ptd::testing::TempDir dir;
  const std::string path = dir.Sub("t.ftf");
  WriteTrace(path, true);
  CommandResult r = RunCommand({PTD_CLI_PATH, "ftf-dump", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("@0x00000000 magic\n"));
  EXPECT_THAT(r.out, HasSubstr("initialization ticks_per_second=1000000000"));
  EXPECT_THAT(r.out, HasSubstr("kernel_object thread koid=41 name=\"demo-main\" args={\"process\": koid 40}"));
  EXPECT_THAT(r.out, HasSubstr("end ts=1900 pid=40 tid=41 cat=\"fn\" name=\"compute\" "
                               "args={\"instructions\": uint64 1234}"));
  EXPECT_THAT(r.out, HasSubstr("top functions by total time:"));
  EXPECT_THAT(r.out, HasSubstr("demo-main (demo)"));
}

TEST(FtfDumpCliTest, SummaryOnlyWithGzip) {
  ptd::testing::TempDir dir;
  const std::string path = dir.Sub("t.ftf.gz");
  WriteTrace(path, true);
  CommandResult r = RunCommand({PTD_CLI_PATH, "ftf-dump", "--summary", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("@0x")));
  EXPECT_THAT(r.out, HasSubstr("threads: 1"));
  EXPECT_THAT(r.out, HasSubstr("1.000 us"));  // main: 1000 .. 2000 ns
  EXPECT_THAT(r.out, HasSubstr("compute"));
}

TEST(FtfDumpCliTest, CheckPassesGoodAndFailsBadFiles) {
  ptd::testing::TempDir dir;
  WriteTrace(dir.Sub("good.ftf"), true);
  WriteTrace(dir.Sub("bad.ftf"), false);
  CommandResult good = RunCommand({PTD_CLI_PATH, "ftf-dump", "--check", dir.Sub("good.ftf")});
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
  EXPECT_THAT(good.out, HasSubstr("structure OK"));
  CommandResult bad = RunCommand({PTD_CLI_PATH, "ftf-dump", "--check", dir.Sub("bad.ftf")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out, HasSubstr("1 structural problem(s)"));
  EXPECT_THAT(bad.out, HasSubstr("thread 40/41: 1 slice(s) never end (innermost 'main'"));
}

TEST(FtfDumpCliTest, MissingOrDamagedFileFails) {
  ptd::testing::TempDir dir;
  CommandResult missing = RunCommand({PTD_CLI_PATH, "ftf-dump", dir.Sub("none.ftf")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("none.ftf"));
  CommandResult usage = RunCommand({PTD_CLI_PATH, "ftf-dump"});
  EXPECT_EQ(usage.exit_code, 2);
}

}  // namespace
}  // namespace ptd::ftf
