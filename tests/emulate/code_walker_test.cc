// The synthetic walker over real libc code: its traces retrace with libipt to exactly
// its ground truth, with and without injected overflows.
#include "recorder/emulate/code_walker.h"

#include <algorithm>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "recorder/emulate/ground_truth.h"
#include "tests/emulate/libipt_retrace.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

struct WalkResult {
  CodeWalkerStats stats;
  RetraceResult retrace;
  std::vector<GroundTruthThread> truth;
};

WalkResult WalkAndRetrace(const TempDir& tmp, CodeWalkerOptions options) {
  WalkResult out;
  absl::StatusOr<CodeWalkerStats> stats =
      WriteWalkerTrace(options, tmp.Sub("walk.dir"), false, tmp.Sub("truth.bin"));
  EXPECT_TRUE(stats.ok()) << stats.status();
  if (!stats.ok()) return out;
  out.stats = *stats;
  TraceMeta meta = LoadMeta(tmp.Sub("walk.dir"));
  EXPECT_EQ(meta.streams.size(), 1u);
  if (meta.streams.empty()) return out;
  out.retrace = RetraceStream(tmp.Sub("walk.dir"), meta, meta.streams[0]);
  absl::StatusOr<std::vector<GroundTruthThread>> truth = LoadGroundTruth(tmp.Sub("truth.bin"));
  EXPECT_TRUE(truth.ok()) << truth.status();
  if (truth.ok()) out.truth = *truth;
  return out;
}

CodeWalkerOptions LibcWalk(uint64_t seed, uint64_t max_instructions) {
  return WalkOptions(kLibc, seed, max_instructions);
}

// libipt decoded the walk without errors, and exactly the instructions the walker
// says it executed.
void ExpectRetraceMatchesTruth(const WalkResult& walk) {
  EXPECT_EQ(walk.retrace.errors, 0) << walk.retrace.first_error;
  ASSERT_EQ(walk.truth.size(), 1u);
  EXPECT_EQ(walk.retrace.instructions, walk.truth[0].ips.size());
}

TEST(CodeWalkerTest, LibcWalkRetracesToItsGroundTruth) {
  if (!PathExists(kLibc)) GTEST_SKIP() << kLibc << " not present";
  TempDir tmp;
  WalkResult walk = WalkAndRetrace(tmp, LibcWalk(/*seed=*/7, 200000));
  EXPECT_EQ(walk.stats.instructions, 200000u);
  EXPECT_GT(walk.stats.calls, 10u);
  ExpectRetraceMatchesTruth(walk);
  ASSERT_EQ(walk.truth.size(), 1u);
  EXPECT_EQ(walk.truth[0].ips.size(), walk.stats.instructions);
  // The decoded blocks begin where the truth says execution went: every block start is
  // an executed instruction (checked on a sample to keep the test fast).
  std::vector<uint64_t> sorted = walk.truth[0].ips;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < walk.retrace.block_ips.size(); i += 97) {
    EXPECT_TRUE(std::binary_search(sorted.begin(), sorted.end(), walk.retrace.block_ips[i]));
  }
}

TEST(CodeWalkerTest, SameSeedSameTraceDifferentSeedDifferentTrace) {
  if (!PathExists(kLibc)) GTEST_SKIP() << kLibc << " not present";
  CodeWalkerOptions options = LibcWalk(/*seed=*/3, 20000);
  TempDir a, b, c;
  ASSERT_TRUE(WriteWalkerTrace(options, a.Sub("w"), false, "").ok());
  ASSERT_TRUE(WriteWalkerTrace(options, b.Sub("w"), false, "").ok());
  options.seed = 4;
  ASSERT_TRUE(WriteWalkerTrace(options, c.Sub("w"), false, "").ok());
  auto bytes = [](const TempDir& d) { return *ReadFileBytes(d.Sub("w/aux/tid1.pt")); };
  EXPECT_EQ(bytes(a), bytes(b));
  EXPECT_NE(bytes(a), bytes(c));
}

TEST(CodeWalkerTest, InjectedOverflowsLoseExactlyTheDroppedInstructions) {
  if (!PathExists(kLibc)) GTEST_SKIP() << kLibc << " not present";
  TempDir tmp;
  CodeWalkerOptions options = LibcWalk(/*seed=*/11, 100000);
  options.overflow_every_bytes = 8192;
  options.overflow_lost_instructions = 50;
  WalkResult walk = WalkAndRetrace(tmp, options);
  EXPECT_GT(walk.stats.lost_instructions, 0u);
  EXPECT_GT(walk.retrace.overflows, 0u);
  ExpectRetraceMatchesTruth(walk);
  ASSERT_EQ(walk.truth.size(), 1u);
  EXPECT_EQ(walk.truth[0].lost, walk.stats.lost_instructions);
}

TEST(CodeWalkerTest, NoRetCompAndLongTntStillRetrace) {
  if (!PathExists(kLibc)) GTEST_SKIP() << kLibc << " not present";
  TempDir tmp;
  CodeWalkerOptions options = LibcWalk(/*seed=*/5, 50000);
  options.generator.noretcomp = true;
  options.generator.long_tnt = true;
  WalkResult walk = WalkAndRetrace(tmp, options);
  EXPECT_EQ(walk.stats.packets.compressed_returns, 0u);
  ExpectRetraceMatchesTruth(walk);
}

TEST(CodeWalkerTest, RefusesAFileThatIsNotElf) {
  TempDir tmp;
  ASSERT_TRUE(WriteFileAtomic(tmp.Sub("x"), std::string_view("not an elf")).ok());
  CodeWalkerOptions options;
  options.elf_path = tmp.Sub("x");
  absl::StatusOr<CodeWalkerStats> stats = WriteWalkerTrace(options, tmp.Sub("w"), false, "");
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(std::string(stats.status().message()).find(tmp.Sub("x")), std::string::npos);
}

}  // namespace
}  // namespace ptd::testing
