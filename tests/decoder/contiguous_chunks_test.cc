// A stream whose bytes come in several chunks with nothing lost between them (a ring
// drained several times, the snapshots of a full-trace recording) is one byte stream:
// cut anywhere, even inside a packet or between two PSBs, it decodes exactly as whole.
#include <string>
#include <vector>

#include "common/trace_meta.h"
#include "decoder/trace_decoder.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using ptd::testing::Program;
using ptd::testing::RecordWithCli;
using ptd::testing::RunCommand;
using ptd::testing::TempDir;

class ContiguousChunksTest : public ::ptd::testing::SuiteSharedTest<ContiguousChunksTest, ::ptd::testing::CliRecording> {
 protected:
  static void SetUpTestSuite() { shared_ = RecordWithCli({Program("ptd_prog_calls")}); }

  // A copy of the recording with each stream's one chunk cut at `cuts` (fractions of its
  // size, odd byte counts so that cuts fall inside packets); `gap` marks the later parts
  // as following lost data.
  static std::string CutCopy(const TempDir& tmp, const std::vector<double>& cuts, bool gap) {
    std::string copy = tmp.Sub("cut");
    auto r = RunCommand({"cp", "-r", shared_->trace, copy});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    absl::StatusOr<TraceMeta> meta = ReadTraceMeta(copy);
    EXPECT_TRUE(meta.ok()) << meta.status();
    if (!meta.ok()) return "";
    for (PtStream& stream : meta->streams) {
      EXPECT_EQ(stream.chunks.size(), 1u);
      const PtChunk whole = stream.chunks[0];
      std::vector<PtChunk> parts;
      uint64_t at = 0;
      for (double fraction : cuts) {
        const uint64_t end = static_cast<uint64_t>(fraction * static_cast<double>(whole.size)) | 1;
        if (end <= at || end >= whole.size) continue;
        PtChunk part = whole;
        part.file_offset = whole.file_offset + at;
        part.aux_offset = whole.aux_offset + at;
        part.size = end - at;
        part.lost_before = gap && at != 0;
        parts.push_back(part);
        at = end;
      }
      PtChunk last = whole;
      last.file_offset = whole.file_offset + at;
      last.aux_offset = whole.aux_offset + at;
      last.size = whole.size - at;
      last.lost_before = gap && at != 0;
      parts.push_back(last);
      stream.chunks = parts;
    }
    absl::Status s = WriteTraceMeta(copy, *meta);
    EXPECT_TRUE(s.ok()) << s;
    return copy;
  }

  static DecodeResult Decode(const std::string& trace, int jobs) {
    DecodeOptions options;
    options.jobs = jobs;
    absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(trace, "", options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : DecodeResult();
  }
};

TEST_F(ContiguousChunksTest, ChunksWithNothingLostBetweenDecodeAsTheWholeStreamAndGapsStayGaps) {
  ASSERT_TRUE(shared_->error.empty()) << shared_->error;
  const DecodeResult whole = Decode(shared_->trace, 1);
  ASSERT_GT(whole.stats[Stat::kInstructions], 10000u);
  ASSERT_EQ(whole.stats[Stat::kErrors], 0u);
  TempDir tmp;
  const std::string cut = CutCopy(tmp, {0.17, 0.31, 0.5, 0.77}, /*gap=*/false);
  for (int jobs : {1, 2}) {
    SCOPED_TRACE(jobs);
    const DecodeResult parts = Decode(cut, jobs);
    EXPECT_EQ(parts.stats[Stat::kInstructions], whole.stats[Stat::kInstructions]);
    EXPECT_EQ(parts.stats[Stat::kCalls], whole.stats[Stat::kCalls]);
    EXPECT_EQ(parts.stats[Stat::kErrors], 0u);
    EXPECT_EQ(parts.stats[Stat::kLost], 0u);
  }
  // The same cuts marked as gaps are gaps: the decoder resynchronizes after each and
  // counts the loss (the join must leave chunks that do not continue alone).
  TempDir gap_tmp;
  const DecodeResult gaps = Decode(CutCopy(gap_tmp, {0.17, 0.31, 0.5, 0.77}, /*gap=*/true), 1);
  EXPECT_LT(gaps.stats[Stat::kInstructions], whole.stats[Stat::kInstructions]);
  EXPECT_GT(gaps.stats[Stat::kLost], 0u);
}

}  // namespace
}  // namespace ptd::decoder
