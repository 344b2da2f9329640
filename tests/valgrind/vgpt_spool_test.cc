// The tool's stream files read from their directory in an order that keeps each
// process's story straight, whatever order the files are listed in: hand-made files of
// a shell that forks after it exec'd, and a child that execs at once; read files keep
// their names until the end.
#include "recorder/valgrind/vgpt_spool.h"

#include <string>
#include <variant>
#include <vector>

#include "common/file_util.h"
#include "common/trace_dir.h"
#include "gtest/gtest.h"
#include "recorder/ptgen/pt_stream_set.h"
#include "recorder/valgrind/vgpt_converter.h"
#include "sideband/record_reader.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/vgpt_stream_builder.h"

namespace ptd {
namespace {

using ::ptd::testing::StreamBuilder;
using ::ptd::testing::TempDir;

void WriteStream(const std::string& path, const StreamBuilder& stream) {
  const std::vector<uint32_t>& w = stream.words();
  ASSERT_TRUE(WriteFileAtomic(path, std::string_view(reinterpret_cast<const char*>(w.data()), w.size() * 4)).ok());
}

// sh (pid 500) forks once and execs bash, whose first fork (its own number 1) makes pid
// 100, listed first (pids wrap); the child execs /bin/true at once. The child waits for
// its parent's second program to reach that fork, its first file staying open though
// its next one exists, and inherits bash, not sh.
TEST(VgptSpoolTest, ChildOfAForkAfterAnExecWaitsForItAndKeepsItsFirstProgram) {
  TempDir tmp;
  const std::string spool_dir = tmp.Sub("stream");
  ASSERT_TRUE(MakeDirs(spool_dir).ok());
  StreamBuilder sh, bash, child, child_true;
  sh.Hello(500, 1, VGPT_HELLO_STARTUP, 0, "/bin/sh").Map(0x1000, 0x1000, "/bin/sh")
      .Block(1, 0x1000, {5}, VGPT_KIND_SYSCALL).Run({1, 1}).Forking(1).Run({1}).Exec();
  bash.Hello(500, 1, VGPT_HELLO_STARTUP, 0, "/bin/bash", 1).Map(0x2000, 0x1000, "/bin/bash")
      .Block(1, 0x2000, {3}, VGPT_KIND_SYSCALL).Run({1, 1, 1}).Forking(1).Run({1}).Exit();
  child.Hello(100, 500, VGPT_HELLO_FORK_CHILD, 1, "/bin/bash", 0, 1)
      .Block(1, 0x2003, {2}, VGPT_KIND_SYSCALL).Run({1}).Exec();
  child_true.Hello(100, 500, VGPT_HELLO_STARTUP, 0, "/bin/true", 1).Map(0x3000, 0x1000, "/bin/true")
      .Block(1, 0x3000, {4}, VGPT_KIND_SYSCALL).Run({1}).Exit();
  WriteStream(spool_dir + "/500-0.vgpt", sh);
  WriteStream(spool_dir + "/500-1.vgpt", bash);
  WriteStream(spool_dir + "/100-0.vgpt", child);
  WriteStream(spool_dir + "/100-1.vgpt", child_true);

  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(tmp.Sub("trace.dir"), false);
  ASSERT_TRUE(dir.ok()) << dir.status();
  PtStreamSet streams(PtStreamSetOptions{}, &*dir);
  VgptConverter converter(VgptConverterOptions{}, &streams, &*dir);
  VgptSpool spool(spool_dir, &converter);
  for (int i = 0; i < 10 && !spool.AllExited(); ++i) ASSERT_TRUE(spool.Poll().ok());
  EXPECT_TRUE(spool.AllExited());
  // Read files stay (emptied) while recording: the tool takes the first free name for a
  // process's next program, which must not be one already read.
  for (const char* name : {"500-0.vgpt", "500-1.vgpt", "100-0.vgpt", "100-1.vgpt"}) {
    EXPECT_TRUE(PathExists(spool_dir + "/" + name)) << name;
  }
  ASSERT_TRUE(spool.Drain().ok());
  EXPECT_FALSE(PathExists(spool_dir + "/500-0.vgpt"));
  TraceMeta meta;
  ASSERT_TRUE(converter.Finish(&meta).ok());

  EXPECT_EQ(converter.stats().forks, 1u);
  EXPECT_EQ(converter.stats().execs, 2u);
  EXPECT_EQ(converter.stats().bad_records, 0u);
  EXPECT_EQ(converter.stats().instructions, 3u + 4u + 1u + 1u);  // every system call retired
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(dir->FilePath("sideband/valgrind.data"));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  RecordReader reader(*bytes, "valgrind.data", RecordFormat{});
  uint64_t bash_exec = 0, fork = 0, true_exec = 0;
  for (auto r = reader.Next(); r.ok() && r->has_value(); r = reader.Next()) {
    const PerfRecord& record = **r;
    if (const auto* c = std::get_if<CommRecord>(&record.body); c != nullptr && c->exec) {
      if (c->comm == "bash") bash_exec = record.sample_id.time;
      if (c->comm == "true") true_exec = record.sample_id.time;
    }
    if (const auto* f = std::get_if<ForkRecord>(&record.body); f != nullptr && f->pid == 100) {
      fork = f->time;
      EXPECT_EQ(f->ppid, 500u);
    }
  }
  // bash's exec, its three system calls, then the fork; the child's exec after it.
  EXPECT_GT(bash_exec, 0u);
  EXPECT_GT(fork, bash_exec + 3 * 1000);
  EXPECT_GT(true_exec, fork);
}

}  // namespace
}  // namespace ptd
