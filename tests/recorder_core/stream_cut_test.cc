#include "recorder/session/stream_cut.h"

#include <gtest/gtest.h>

#include <string>

#include "common/file_util.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

PtChunk MakeChunk(uint64_t file_offset, uint64_t size, uint64_t aux_offset) {
  PtChunk chunk;
  chunk.file_offset = file_offset;
  chunk.size = size;
  chunk.aux_offset = aux_offset;
  chunk.reason = "linear";
  return chunk;
}

class CutStreamFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.Sub("tid1.pt");
    ASSERT_TRUE(WriteFileAtomic(path_, std::string_view("0123456789abcdefghij")).ok());
    // Three chunks; the third follows a gap in the AUX stream (a truncation).
    chunks_ = {MakeChunk(0, 6, 0), MakeChunk(6, 8, 6), MakeChunk(14, 6, 100)};
  }
  ptd::testing::TempDir dir_;
  std::string path_;
  std::vector<PtChunk> chunks_;
};

TEST_F(CutStreamFileTest, DropsTheChunksBeforeTheCutAndReBasesTheRest) {
  ASSERT_TRUE(CutStreamFile(path_, 9, &chunks_).ok());
  EXPECT_EQ(*ReadFileToString(path_), "9abcdefghij");
  ASSERT_EQ(chunks_.size(), 2u);
  // The chunk across the cut starts at it, in the file and in the AUX stream.
  EXPECT_EQ(chunks_[0].file_offset, 0u);
  EXPECT_EQ(chunks_[0].size, 5u);
  EXPECT_EQ(chunks_[0].aux_offset, 9u);
  EXPECT_TRUE(chunks_[0].lost_before);
  EXPECT_EQ(chunks_[1].file_offset, 5u);
  EXPECT_EQ(chunks_[1].size, 6u);
  EXPECT_EQ(chunks_[1].aux_offset, 100u);
  EXPECT_FALSE(chunks_[1].lost_before);
}

TEST_F(CutStreamFileTest, ACutAtAChunkBoundaryKeepsTheNextChunkWhole) {
  ASSERT_TRUE(CutStreamFile(path_, 14, &chunks_).ok());
  EXPECT_EQ(*ReadFileToString(path_), "efghij");
  ASSERT_EQ(chunks_.size(), 1u);
  EXPECT_EQ(chunks_[0], [] {
    PtChunk c = MakeChunk(0, 6, 100);
    c.lost_before = true;
    return c;
  }());
}

TEST_F(CutStreamFileTest, ZeroChangesNothingAndAMissingFileIsAnErrorNamingIt) {
  const std::vector<PtChunk> before = chunks_;
  ASSERT_TRUE(CutStreamFile(path_, 0, &chunks_).ok());
  EXPECT_EQ(chunks_, before);
  EXPECT_EQ(*ReadFileToString(path_), "0123456789abcdefghij");
  absl::Status missing = CutStreamFile(dir_.Sub("gone.pt"), 4, &chunks_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.message()).find("gone.pt"), std::string::npos);
  EXPECT_EQ(chunks_, before);
}

}  // namespace
}  // namespace ptd
