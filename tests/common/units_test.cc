// ParseDurationNs / ParseByteSize: what the huge-trace options accept and refuse.
#include "common/units.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;

TEST(UnitsTest, DurationsWithUnits) {
  EXPECT_EQ(*ParseDurationNs("1us"), 1000u);
  EXPECT_EQ(*ParseDurationNs("2.5ms"), 2'500'000u);
  EXPECT_EQ(*ParseDurationNs("3s"), 3'000'000'000u);
  EXPECT_EQ(*ParseDurationNs("750ns"), 750u);
  EXPECT_EQ(*ParseDurationNs("42"), 42u);  // bare: ns
  EXPECT_EQ(*ParseDurationNs(" 1 US "), 1000u);
}

TEST(UnitsTest, NonsenseDurationsAreErrorsNamingTheValue) {
  for (const char* bad : {"", "us", "-1us", "1parsec", "1..2us", "abc", "1e400s", "99999999999s"}) {
    absl::StatusOr<uint64_t> d = ParseDurationNs(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(d.status().message(), HasSubstr(std::string("'") + bad + "'"));
  }
}

TEST(UnitsTest, Sizes) {
  EXPECT_EQ(*ParseByteSize("2MB"), 2'000'000u);
  EXPECT_EQ(*ParseByteSize("2MiB"), 2u * 1024 * 1024);
  EXPECT_EQ(*ParseByteSize("512kb"), 512'000u);
  EXPECT_EQ(*ParseByteSize("1.5GB"), 1'500'000'000u);
  EXPECT_EQ(*ParseByteSize("100"), 100u);
  EXPECT_FALSE(ParseByteSize("2 lightyears").ok());
  EXPECT_FALSE(ParseByteSize("MB").ok());
  EXPECT_FALSE(ParseByteSize("-3MB").ok());
}

TEST(UnitsTest, Formatting) {
  EXPECT_EQ(FormatDurationNs(999), "999 ns");
  EXPECT_EQ(FormatDurationNs(1500), "1.500 us");
  EXPECT_EQ(FormatByteSize(1'940'000), "1.94 MB");
}

}  // namespace
}  // namespace ptd
