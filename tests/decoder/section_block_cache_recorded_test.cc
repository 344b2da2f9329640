// The decode's shared runs of code (decoder/flow/section_block_cache.h) on a recorded program
// with two processes: the child, before and after its exec, runs library code the parent
// ran (after the exec at other addresses), and takes those runs from the shared cache;
// the output stays libipt's block decoder's.
#include <cstdio>

#include "absl/status/statusor.h"
#include "decoder/stats.h"
#include "decoder/trace_decoder.h"
#include "gtest/gtest.h"
#include "tests/decoder/decoder_diff.h"
#include "tests/decoder/recorded_program.h"

namespace ptd::decoder {
namespace {

TEST(SectionBlockCacheRecordedTest, ForkedAndExecedProcessesShareLibraryRuns) {
  testing::Recording rec = testing::Record("ptd_prog_fork_exec", {});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  DecodeOptions options;
  options.decoder = DecoderKind::kFast;
  absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(rec.trace, "", options);
  ASSERT_TRUE(result.ok()) << result.status();
  const uint64_t shared = result->stats[Stat::kFastRunsShared];
  const uint64_t decoded = result->stats[Stat::kFastRunsDecoded];
  std::printf("runs: %llu shared, %llu decoded\n", static_cast<unsigned long long>(shared),
              static_cast<unsigned long long>(decoded));
  EXPECT_GT(shared, 0u);
  EXPECT_GT(decoded, 0u);
  EXPECT_EQ(testing::CompareFastWithLibiptBlock(rec.trace), "");
}

}  // namespace
}  // namespace ptd::decoder
