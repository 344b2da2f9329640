#include "common/pt_psb.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

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

TEST(FindPsbsWithTscTest, PadsInsideAPsbPlusDoNotHideItsTsc) {
  // PSB, a run of PADs longer than any PSB+ has packets, TSC, PSBEND: real PT pads
  // inside PSB+ (the perf samples show PSB 00 00 00 MODE ...).
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 8; ++i) bytes.insert(bytes.end(), {0x02, 0x82});
  bytes.insert(bytes.end(), 40, 0x00);
  bytes.insert(bytes.end(), {0x19, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22});  // TSC
  bytes.insert(bytes.end(), {0x02, 0x23});  // PSBEND
  std::vector<PsbTsc> psbs = FindPsbsWithTsc(bytes);
  ASSERT_EQ(psbs.size(), 1u);
  EXPECT_EQ(psbs[0].tsc, 0x22334455667788ull);
  EXPECT_EQ(PsbPlusTscAt(bytes, 0), 0x22334455667788ull);
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

// The byte search against the obvious one: random bytes rich in the pattern's own bytes
// (partial patterns everywhere), with PSBs planted back to back, overlapping, at the
// start and cut short at the end.
TEST(FindPsbOffsetsTest, FindsWhatANaiveSearchFinds) {
  const uint8_t psb[kPsbSize] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};
  auto naive = [&](const std::vector<uint8_t>& bytes) {
    std::vector<uint64_t> out;
    for (size_t at = 0; at + kPsbSize <= bytes.size();) {
      if (std::equal(psb, psb + kPsbSize, bytes.begin() + static_cast<std::ptrdiff_t>(at))) {
        out.push_back(at);
        at += kPsbSize;
      } else {
        ++at;
      }
    }
    return out;
  };
  std::mt19937 random(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<uint8_t> bytes(1 + random() % 3000);
    for (uint8_t& b : bytes) {
      const uint32_t r = random() % 8;
      b = r < 3 ? 0x02 : r < 6 ? 0x82 : static_cast<uint8_t>(random());
    }
    for (int k = 0; k < 6; ++k) {
      const size_t at = random() % bytes.size();
      const size_t n = std::min<size_t>(kPsbSize - (k == 5 ? 1 : 0), bytes.size() - at);
      std::copy(psb, psb + n, bytes.begin() + static_cast<std::ptrdiff_t>(at));
    }
    if (round % 2 == 0 && bytes.size() >= 2 * kPsbSize) {
      std::copy(psb, psb + kPsbSize, bytes.begin());  // at the start, then one after it
      std::copy(psb, psb + kPsbSize, bytes.begin() + kPsbSize);
    }
    EXPECT_EQ(FindPsbOffsets(absl::MakeConstSpan(bytes)), naive(bytes)) << "round " << round;
  }
  EXPECT_TRUE(FindPsbOffsets({}).empty());
  // An 18-byte run of the pattern holds one PSB (not overlapping), at 0.
  std::vector<uint8_t> run;
  for (int i = 0; i < 9; ++i) run.insert(run.end(), {0x02, 0x82});
  EXPECT_EQ(FindPsbOffsets(absl::MakeConstSpan(run)), std::vector<uint64_t>{0});
}

}  // namespace
}  // namespace ptd
