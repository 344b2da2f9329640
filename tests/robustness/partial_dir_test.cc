// The pieces under the fault handling: a partial trace directory (CommitPartial cuts
// chunks to the bytes on disk and keeps the directory), a failed commit keeps the
// staging directory, and build-ids read without libelf agree with the image module.
#include <string>
#include <utility>

#include "common/elf_build_id.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "image/elf_reader.h"
#include "tests/robustness/child_process.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

using ::testing::HasSubstr;

TEST(PartialDirTest, CommitPartialCutsChunksToTheBytesOnDisk) {
  TempDir tmp;
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(tmp.Sub("t.dir"), false);
  ASSERT_TRUE(dir.ok());
  // 1000 bytes reached the disk; the generator believed 3000 were written in 3 chunks.
  ASSERT_TRUE(WriteFileAtomic(dir->FilePath("aux/tid1.pt"), std::string(1000, 'x')).ok());
  TraceMeta meta;
  PtStream stream;
  stream.file = "aux/tid1.pt";
  for (auto [offset, size] : {std::pair{0, 600}, std::pair{600, 1000}, std::pair{1600, 1400}}) {
    PtChunk chunk;
    chunk.file_offset = offset;
    chunk.size = size;
    stream.chunks.push_back(chunk);
  }
  meta.streams.push_back(stream);
  ASSERT_TRUE(dir->CommitPartial(meta, absl::ResourceExhaustedError("aux/tid1.pt: write failed: File too large")).ok());

  absl::StatusOr<TraceMeta> back = ReadTraceMeta(tmp.Sub("t.dir"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->partial);
  EXPECT_THAT(back->partial_reason, HasSubstr("File too large"));
  EXPECT_EQ(back->end_reason, "error");
  ASSERT_EQ(back->streams[0].chunks.size(), 2u);
  EXPECT_EQ(back->streams[0].chunks[0].size, 600u);
  EXPECT_FALSE(back->streams[0].chunks[0].truncated);
  EXPECT_EQ(back->streams[0].chunks[1].size, 400u);
  EXPECT_TRUE(back->streams[0].chunks[1].truncated);
}

TEST(PartialDirTest, FailedCommitKeepsTheStagingDirectoryAndNamesIt) {
  TempDir tmp;
  const std::string final_dir = tmp.Sub("t.dir");
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(final_dir, false);
  ASSERT_TRUE(dir.ok());
  const std::string staging = dir->staging_dir();
  ASSERT_TRUE(WriteFileAtomic(dir->FilePath("aux/tid1.pt"), std::string("recorded")).ok());
  ASSERT_TRUE(MakeDirs(final_dir).ok());  // appears while recording
  // A named meta, not a temporary: GCC 12 at -O3 takes the temporary's strings for
  // uninitialized (-Wmaybe-uninitialized, a false positive).
  const TraceMeta meta;
  absl::Status st = dir->Commit(meta);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("the recorded data is kept in " + staging));
  dir = absl::InternalError("drop the writer");  // its destructor must not remove the data
  EXPECT_TRUE(PathExists(staging + "/aux/tid1.pt"));
  EXPECT_TRUE(PathExists(staging + "/meta.json"));
}

TEST(PartialDirTest, BuildIdAgreesWithTheImageModule) {
  for (const std::string& path : {CoreProgram("ptd_core_spin_target"), CliPath()}) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
    ASSERT_TRUE(bytes.ok());
    absl::StatusOr<image::ElfInfo> info = image::ReadElfInfo(*bytes, path);
    ASSERT_TRUE(info.ok()) << info.status();
    absl::StatusOr<std::string> id = ReadElfBuildId(path);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_FALSE(id->empty()) << path;
    EXPECT_EQ(*id, info->build_id) << path;
  }
  TempDir tmp;
  ASSERT_TRUE(WriteFileAtomic(tmp.Sub("junk"), std::string(100, 'j')).ok());
  absl::StatusOr<std::string> junk = ReadElfBuildId(tmp.Sub("junk"));
  ASSERT_FALSE(junk.ok());
  EXPECT_THAT(junk.status().message(), HasSubstr(tmp.Sub("junk") + ": not a 64-bit"));
}

}  // namespace
}  // namespace ptd::testing
