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

// Cuts for threads: the first PSB at or after each k·size/parts, increasing, inside the
// buffer; none for one part or a small buffer.
TEST(CutsAtPsbsTest, CutsAtTheFirstPsbPastEachShare) {
  const std::vector<uint64_t> psbs = {0, 100, 240, 260, 520, 900};
  EXPECT_EQ(CutsAtPsbs(1000, psbs, 2, 0), (std::vector<uint64_t>{520}));
  EXPECT_EQ(CutsAtPsbs(1000, psbs, 4, 0), (std::vector<uint64_t>{260, 520, 900}));
  // Two shares meeting the same PSB give one cut, the next share the PSB after it.
  EXPECT_EQ(CutsAtPsbs(1000, {0, 600, 700}, 4, 0), (std::vector<uint64_t>{600, 700}));
  EXPECT_TRUE(CutsAtPsbs(1000, psbs, 1, 0).empty());
  EXPECT_TRUE(CutsAtPsbs(1000, psbs, 2, 1001).empty());
  EXPECT_TRUE(CutsAtPsbs(1000, {0}, 2, 0).empty());
}

}  // namespace
}  // namespace ptd
