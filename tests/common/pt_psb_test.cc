#include "common/pt_psb.h"

#include <gtest/gtest.h>

#include "tests/testing/psb_stream.h"

namespace ptd {
namespace {

TEST(FindPsbsWithTscTest, FindsEveryPsbWithTheTscOfItsPsbPlus) {
  std::vector<uint64_t> offsets;
  const std::vector<uint8_t> bytes = testing::PsbStream({1000, std::nullopt, 0x123456789ull}, &offsets);
  std::vector<PsbTsc> psbs = FindPsbsWithTsc(bytes);
  ASSERT_EQ(psbs.size(), 3u);
  for (size_t i = 0; i < psbs.size(); ++i) EXPECT_EQ(psbs[i].offset, offsets[i]);
  EXPECT_EQ(psbs[0].tsc, 1000u);
  EXPECT_FALSE(psbs[1].tsc.has_value());  // TSC off: no time to compare
  EXPECT_EQ(psbs[2].tsc, 0x123456789ull);
}

TEST(FindPsbsWithTscTest, SkipsBytesBeforeTheFirstPsbAndReadsNothingInAnEmptyBuffer) {
  std::vector<uint8_t> bytes(37, 0x00);  // PADs: no PSB
  const std::vector<uint8_t> stream = testing::PsbStream({42});
  bytes.insert(bytes.end(), stream.begin(), stream.end());
  std::vector<PsbTsc> psbs = FindPsbsWithTsc(bytes);
  ASSERT_EQ(psbs.size(), 1u);
  EXPECT_EQ(psbs[0].offset, 37u);
  EXPECT_EQ(psbs[0].tsc, 42u);
  EXPECT_TRUE(FindPsbsWithTsc({}).empty());
}

}  // namespace
}  // namespace ptd
