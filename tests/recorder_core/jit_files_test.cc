// ArchiveJitFiles, the end-of-recording step every backend shares: the jitdumps the
// sideband shows mapped and the perf maps of every process it names are copied into
// images/, and what could not be copied is a note.
#include "recorder/images/jit_files.h"

#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "gtest/gtest.h"
#include "sideband/record_builder.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

bool HasNote(const TraceMeta& meta, const std::string& part) {
  for (const std::string& n : meta.notes) {
    if (absl::StrContains(n, part)) return true;
  }
  return false;
}

TEST(ArchiveJitFilesTest, CopiesMappedJitdumpsAndPerfMapsOfEveryProcessInTheSideband) {
  testing::TempDir tmp;
  // Pids far above pid_max so that no real process's /tmp/perf-PID.map interferes.
  const int parent = 1 << 30, child = parent + 1, gone = parent + 2;
  const std::string jitdump = tmp.Sub(absl::StrCat("jit-", parent, ".dump"));
  ASSERT_TRUE(WriteFileAtomic(jitdump, std::string_view("JiTD-bytes")).ok());
  const std::string child_map = absl::StrCat("/tmp/perf-", child, ".map");
  ASSERT_TRUE(WriteFileAtomic(child_map, std::string_view("1000 10 jitted\n")).ok());

  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(tmp.Sub("trace.dir"), false);
  ASSERT_TRUE(dir.ok()) << dir.status();
  RecordBuilder builder(RecordFormat{kSidebandSampleType, true});
  Mmap2Record announce;
  announce.pid = announce.tid = parent;
  announce.addr = 0x7f0000000000;
  announce.len = 4096;
  announce.filename = jitdump;
  builder.Append(announce);
  Mmap2Record deleted = announce;
  deleted.pid = deleted.tid = gone;
  deleted.filename = tmp.Sub(absl::StrCat("jit-", gone, ".dump"));  // never written
  builder.Append(deleted);
  ForkRecord fork;
  fork.pid = fork.tid = child;
  fork.ppid = fork.ptid = parent;
  builder.Append(fork);
  SidebandFile file;
  file.file = "sideband/test.data";
  file.sample_type = kSidebandSampleType;
  file.sample_id_all = true;
  ASSERT_TRUE(WriteFileAtomic(dir->FilePath(file.file), absl::MakeConstSpan(builder.bytes())).ok());
  TraceMeta meta;
  meta.pids = {parent};
  meta.sideband.push_back(file);

  ArchiveJitFiles(*dir, &meta);
  unlink(child_map.c_str());

  absl::StatusOr<std::string> copied = ReadFileToString(dir->FilePath(absl::StrCat("images/jit-", parent, ".dump")));
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(*copied, "JiTD-bytes");
  absl::StatusOr<std::string> map = ReadFileToString(dir->FilePath(absl::StrCat("images/perf-", child, ".map")));
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(*map, "1000 10 jitted\n");
  EXPECT_TRUE(HasNote(meta, absl::StrCat("copied jitdump ", jitdump)));
  EXPECT_TRUE(HasNote(meta, absl::StrCat("jitdump ", deleted.filename, " of pid ", gone, " not copied")));
  EXPECT_FALSE(PathExists(dir->FilePath(absl::StrCat("images/perf-", parent, ".map"))));  // none was written
}

}  // namespace
}  // namespace ptd
