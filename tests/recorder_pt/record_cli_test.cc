// `ptrace-direct record` through the real binary on this machine (no Intel PT).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "common/file_util.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;
using testing::RunCommand;

constexpr char kNoPt[] =
    "ptrace-direct: no intel_pt PMU on this machine (AMD, VM, or old kernel); use --emulate\n";

bool MachineHasPt() { return IsDirectory("/sys/bus/event_source/devices/intel_pt"); }

TEST(RecordCliTest, AttachWithoutIntelPtFailsFastWithTheMessage) {
  if (MachineHasPt()) GTEST_SKIP() << "intel_pt present";
  testing::TempDir dir;
  auto r = RunCommand({PTD_CLI_PATH, "record", "--pid", std::to_string(getpid()), "-o",
                       dir.Sub("t.dir")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, kNoPt);
  EXPECT_FALSE(PathExists(dir.Sub("t.dir")));
}

TEST(RecordCliTest, LaunchWithoutIntelPtFailsTheSameWayAndRunsNothing) {
  if (MachineHasPt()) GTEST_SKIP() << "intel_pt present";
  testing::TempDir dir;
  const std::string marker = dir.Sub("ran");
  auto r = RunCommand({PTD_CLI_PATH, "record", "--snapshot", "--timing", "high", "-o",
                       dir.Sub("t.dir"), "--", "/usr/bin/touch", marker});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, kNoPt);
  EXPECT_FALSE(PathExists(marker));
}

TEST(RecordCliTest, HelpListsEveryRecordOption) {
  auto r = RunCommand({PTD_CLI_PATH, "record", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option :
       {"--pid", "--output", "--force", "--emulate", "--per-thread", "--snapshot",
        "--snapshot-size", "--buffer-size", "--data-size", "--timing", "--pt-config",
        "--kernel", "--filter", "--trigger", "--multi-snapshot", "--control", "--duration",
        "--start-at", "--ground-truth", "--virtual-cpus", "--psb-period", "--noretcomp",
        "--emulate-overflow-every", "--quiet"}) {
    EXPECT_THAT(r.out, HasSubstr(option)) << option;
  }
}

TEST(RecordCliTest, BadTimingPresetIsAUsageError) {
  auto r = RunCommand({PTD_CLI_PATH, "record", "--timing", "extreme", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("timing"));
}

}  // namespace
}  // namespace ptd
