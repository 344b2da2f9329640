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

// The "no intel_pt PMU" refusal is no longer the CLI's answer on this machine: since the
// Valgrind backend (main e270a58) `record` emulates by itself without a PMU, and
// `record --pid <this test>` then attached the ptrace emulator to the test itself and
// hung. The refusal stays tested through RecordHardware and the API
// (hardware_recorder_test.cc, recorder_api_test.cc, pt_pmu_test.cc).

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
