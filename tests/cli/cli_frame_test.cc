// The command-line frame: help, version and usage errors, through the real binary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;
using testing::RunCommand;

TEST(CliFrameTest, TopLevelHelpListsSubcommands) {
  auto r = RunCommand({PTD_CLI_PATH, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* sub : {"record", "decode", "info", "import", "export", "ftf-dump"}) {
    EXPECT_THAT(r.out, HasSubstr(sub)) << sub;
  }
}

TEST(CliFrameTest, SubcommandHelpPrintsUsage) {
  for (const char* sub : {"record", "decode", "info", "import"}) {
    auto r = RunCommand({PTD_CLI_PATH, sub, "--help"});
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_THAT(r.out, HasSubstr("Usage")) << sub;
  }
}

TEST(CliFrameTest, VersionPrintsToolVersion) {
  auto r = RunCommand({PTD_CLI_PATH, "--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("ptrace-direct 0."));
}

TEST(CliFrameTest, UnknownOptionIsUsageError) {
  auto r = RunCommand({PTD_CLI_PATH, "decode", "--no-such-option"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(r.err.empty());
}

TEST(CliFrameTest, UnknownSubcommandIsUsageError) {
  auto r = RunCommand({PTD_CLI_PATH, "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(CliFrameTest, NoSubcommandIsUsageError) {
  auto r = RunCommand({PTD_CLI_PATH});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(CliFrameTest, InfoOnMissingDirectoryNamesIt) {
  auto r = RunCommand({PTD_CLI_PATH, "info", "/nonexistent/trace.dir"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/trace.dir"));
}

}  // namespace
}  // namespace ptd
