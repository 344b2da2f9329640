#include "recorder/target/namespace_pids.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace ptd {
namespace {

using ::testing::HasSubstr;

TEST(NamespacePidsTest, InnermostPidIsTheLastOfNsPid) {
  EXPECT_EQ(*InnermostPidFromStatus("Name:\tloop\nNSpid:\t30132\t7\t1\nNSpgid:\t30132\n", "s"), 1);
  EXPECT_EQ(*InnermostPidFromStatus("NSpid:\t42\n", "s"), 42);
}

TEST(NamespacePidsTest, BadOrMissingNsPidNamesTheFile) {
  absl::StatusOr<int> bad = InnermostPidFromStatus("NSpid:\tx\n", "/proc/9/status");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("/proc/9/status: bad NSpid line"));
  absl::StatusOr<int> missing = InnermostPidFromStatus("Name:\tx\n", "/proc/9/status");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no NSpid line"));
}

TEST(NamespacePidsTest, ThisProcessIsInTheRecordersNamespace) {
  EXPECT_TRUE(ReadNamespaceTids(getpid()).empty());
  EXPECT_TRUE(ReadNamespaceTids(-5).empty());
}

}  // namespace
}  // namespace ptd
