#include "common/trace_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/file_util.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

TEST(TraceDirWriterTest, CommitMakesCompleteDirectoryAppear) {
  testing::TempDir tmp;
  std::string dir = tmp.Sub("t.dir");
  {
    absl::StatusOr<TraceDirWriter> w = TraceDirWriter::Create(dir, false);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE(WriteFileAtomic(w->FilePath("aux/cpu0.pt"), std::string_view("abc")).ok());
    EXPECT_FALSE(PathExists(dir)) << "must not be visible before Commit";
    TraceMeta m;
    m.mode = TraceMode::kEmulated;
    ASSERT_TRUE(w->Commit(m).ok());
  }
  EXPECT_TRUE(IsDirectory(dir));
  EXPECT_EQ(*ReadFileToString(dir + "/aux/cpu0.pt"), "abc");
  absl::StatusOr<TraceMeta> back = ReadTraceMeta(dir);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->mode, TraceMode::kEmulated);
}

TEST(TraceDirWriterTest, AbandonedWriterLeavesNothing) {
  testing::TempDir tmp;
  std::string dir = tmp.Sub("t.dir");
  std::string staging;
  {
    absl::StatusOr<TraceDirWriter> w = TraceDirWriter::Create(dir, false);
    ASSERT_TRUE(w.ok());
    staging = w->staging_dir();
    EXPECT_TRUE(IsDirectory(staging));
  }
  EXPECT_FALSE(PathExists(dir));
  EXPECT_FALSE(PathExists(staging));
}

TEST(TraceDirWriterTest, RefusesExistingDirectoryWithoutForce) {
  testing::TempDir tmp;
  std::string dir = tmp.Sub("t.dir");
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/keep", std::string_view("old")).ok());
  absl::StatusOr<TraceDirWriter> w = TraceDirWriter::Create(dir, false);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), ::testing::HasSubstr("--force"));
  EXPECT_EQ(*ReadFileToString(dir + "/keep"), "old");

  absl::StatusOr<TraceDirWriter> forced = TraceDirWriter::Create(dir, true);
  ASSERT_TRUE(forced.ok());
  // A named meta, not a temporary: GCC 12 at -O3 takes the temporary's strings for
  // uninitialized (-Wmaybe-uninitialized, a false positive).
  const TraceMeta meta;
  ASSERT_TRUE(forced->Commit(meta).ok());
  EXPECT_FALSE(PathExists(dir + "/keep"));
  EXPECT_TRUE(PathExists(dir + "/meta.json"));
}

}  // namespace
}  // namespace ptd
