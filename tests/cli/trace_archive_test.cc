// Self-contained trace directories (recorder/images/trace_archive.h) through the real binary:
// a program recorded from a copy in a temp dir, then overwritten with another program,
// decodes exactly as before; so does the directory moved elsewhere; damaged archive
// entries are warned about and decode falls back to the path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/elf_build_id.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "tests/testing/test_util.h"

extern char** environ;

namespace ptd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Copies `from` over `to` in place (same inode, as `cp` does), so a hard link to `to`
// would see the new bytes too.
void Overwrite(const std::string& from, const std::string& to) {
  auto r = RunCommand({"cp", from, to});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

struct ArchiveDecode {
  int exit_code = -1;
  std::string err;
  int64_t instructions = -1, calls = -1, returns = -1, errors = -1;
  std::string ftf;
};

class TraceArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The shared cache of this test only (the default is ~/.cache/ptrace-direct).
    setenv("PTD_CACHE_DIR", tmp_.Sub("cache").c_str(), 1);
    prog_ = tmp_.Sub("prog");
    Overwrite(Program("ptd_prog_calls"), prog_);
  }
  void TearDown() override { unsetenv("PTD_CACHE_DIR"); }

  std::string Record(const std::string& name, const std::string& emulator, bool archive = true) {
    std::string trace = tmp_.Sub(name);
    std::vector<std::string> args = {"record", absl::StrCat("--emulate=", emulator), "-q", "-o", trace};
    if (!archive) args.push_back("--no-archive");
    args.insert(args.end(), {"--", prog_});
    auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return trace;
  }

  ArchiveDecode Decode(const std::string& trace) {
    ArchiveDecode d;
    std::string out = tmp_.Sub(absl::StrCat("out", ++decodes_, ".ftf"));
    std::string stats = tmp_.Sub(absl::StrCat("stats", decodes_, ".json"));
    auto r = RunCli({"decode", trace, "-o", out, "--stats-json", stats, "-q"});
    d.exit_code = r.exit_code;
    d.err = r.err;
    std::string json = ReadFileToString(stats).value_or("");
    d.instructions = JsonNumber(json, "instructions");
    d.calls = JsonNumber(json, "calls");
    d.returns = JsonNumber(json, "returns");
    d.errors = JsonNumber(json, "errors");
    d.ftf = ReadFileToString(out).value_or("");
    return d;
  }

  // The archive entry of the recorded program.
  ArchivedFile ProgramEntry(const std::string& trace) {
    absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
    EXPECT_TRUE(meta.ok()) << meta.status();
    if (meta.ok()) {
      for (const ArchivedFile& f : meta->archive) {
        if (f.path == prog_) return f;
      }
    }
    ADD_FAILURE() << "no archive entry for " << prog_;
    return {};
  }

  void ExpectSameDecode(const ArchiveDecode& got, const ArchiveDecode& want) {
    EXPECT_EQ(got.exit_code, 0) << got.err;
    EXPECT_EQ(got.instructions, want.instructions);
    EXPECT_EQ(got.calls, want.calls);
    EXPECT_EQ(got.returns, want.returns);
    EXPECT_EQ(got.errors, 0);
    EXPECT_TRUE(got.ftf == want.ftf) << "FTF differs";
  }

  TempDir tmp_;
  std::string prog_;
  int decodes_ = 0;
};

TEST_F(TraceArchiveTest, ReplacedBinaryDecodesAsRecorded) {
  const std::string trace = Record("trace", "ptrace");
  const std::string plain = Record("plain", "ptrace", /*archive=*/false);
  const ArchiveDecode before = Decode(trace);
  ASSERT_EQ(before.exit_code, 0) << before.err;
  ASSERT_GT(before.instructions, 10000);
  ASSERT_EQ(before.errors, 0);
  EXPECT_THAT(before.err, Not(HasSubstr("warning")));
  const ArchiveDecode plain_before = Decode(plain);

  Overwrite(Program("ptd_prog_vdso"), prog_);
  ExpectSameDecode(Decode(trace), before);
  // Without the archive the same change breaks the decode: the test is not hollow.
  const ArchiveDecode plain_after = Decode(plain);
  EXPECT_THAT(plain_after.err, HasSubstr("no longer matches the traced file"));
  EXPECT_NE(plain_after.ftf, plain_before.ftf);

  // The copy is one file shared with the cache (hard link), read-only.
  const ArchivedFile entry = ProgramEntry(trace);
  struct stat in_trace, in_cache;
  ASSERT_EQ(::stat(ResolveTracePath(trace, entry.file).c_str(), &in_trace), 0);
  ASSERT_EQ(::stat(tmp_.Sub(absl::StrCat("cache/by-build-id/", entry.build_id.substr(0, 2), "/",
                                         entry.build_id.substr(2))).c_str(), &in_cache), 0);
  EXPECT_EQ(in_trace.st_ino, in_cache.st_ino);
  EXPECT_EQ(in_trace.st_mode & 0222, 0u);

  auto info = RunCli({"info", trace});
  EXPECT_THAT(info.out, HasSubstr(absl::StrCat(entry.build_id, "  ", prog_)));
  EXPECT_THAT(info.out, ::testing::ContainsRegex("archive: [0-9]+ mapped file\\(s\\), [0-9.]+ MB"));
  EXPECT_THAT(RunCli({"info", plain}).out, HasSubstr("archive: none"));
}

TEST_F(TraceArchiveTest, MovedTraceDecodesTheSame) {
  const std::string trace = Record("trace", "ptrace");
  const ArchiveDecode before = Decode(trace);
  ASSERT_EQ(before.errors, 0) << before.err;
  const std::string moved = tmp_.Sub("elsewhere/moved.trace");
  ASSERT_TRUE(MakeDirs(tmp_.Sub("elsewhere")).ok());
  ASSERT_EQ(::rename(trace.c_str(), moved.c_str()), 0);
  ::unlink(prog_.c_str());  // and the program is gone
  ExpectSameDecode(Decode(moved), before);
}

TEST_F(TraceArchiveTest, ValgrindBackendArchivesToo) {
  auto probe = RunCli({"record", "--emulate=valgrind", "-q", "-o", tmp_.Sub("probe"), "--", "/bin/true"});
  if (probe.exit_code != 0) GTEST_SKIP() << "the Valgrind backend cannot run here: " << probe.err;
  const std::string trace = Record("trace", "valgrind");
  const ArchiveDecode before = Decode(trace);
  ASSERT_EQ(before.errors, 0) << before.err;
  EXPECT_FALSE(ProgramEntry(trace).file.empty());
  Overwrite(Program("ptd_prog_vdso"), prog_);
  ExpectSameDecode(Decode(trace), before);
}

// The first process whose mappings include `path` among the descendants of `pid`
// (Valgrind's launcher execs the tool, which maps the program); 0 when none (yet).
int ProcessMapping(int pid, const std::string& path) {
  if (ReadFileToString(absl::StrCat("/proc/", pid, "/maps")).value_or("").find(path) != std::string::npos) {
    return pid;
  }
  std::string children = ReadFileToString(absl::StrCat("/proc/", pid, "/task/", pid, "/children")).value_or("");
  for (absl::string_view id : absl::StrSplit(children, ' ', absl::SkipEmpty())) {
    int child = 0;
    if (!absl::SimpleAtoi(id, &child)) continue;
    if (int found = ProcessMapping(child, path); found != 0) return found;
  }
  return 0;
}

// Valgrind runs the program itself and reports each mapping as it is made: the recorder
// pins the file then, so a binary replaced (a new inode at its path, as a rebuild or an
// upgrade does) while the program still runs is archived as the program mapped it. Read
// when recording ended, the path would give the new program (and its build-id).
TEST_F(TraceArchiveTest, ValgrindArchivesTheFileAsMappedWhenReplacedDuringTheRecording) {
  auto probe = RunCli({"record", "--emulate=valgrind", "-q", "-o", tmp_.Sub("probe"), "--", "/bin/true"});
  if (probe.exit_code != 0) GTEST_SKIP() << "the Valgrind backend cannot run here: " << probe.err;
  if (std::getenv("PTD_UNDER_SANITIZER") != nullptr) {
    GTEST_SKIP() << "the attach target is built with ASan here, and ASan programs do not run under Valgrind";
  }
  if (::geteuid() != 0) {
    GTEST_SKIP() << "opening /proc/PID/map_files needs CAP_SYS_ADMIN: without it the pin races the replacement";
  }
  Overwrite(PTD_ATTACH_TARGET, prog_);
  absl::StatusOr<std::string> original_id = ReadElfBuildId(prog_);
  ASSERT_TRUE(original_id.ok() && !original_id->empty()) << "the test program has no build-id";
  const std::string trace = tmp_.Sub("trace");
  std::vector<std::string> args = {PTD_CLI_PATH, "record", "--emulate=valgrind", "-q", "-o", trace, "--", prog_, "1500"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t recorder = 0;
  ASSERT_EQ(posix_spawn(&recorder, PTD_CLI_PATH, nullptr, nullptr, argv.data(), environ), 0);
  int program = 0;
  for (int i = 0; i < 1000 && program == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    program = ProcessMapping(recorder, prog_);
  }
  ASSERT_NE(program, 0) << "the program did not start under Valgrind";

  // Replaced the way `install` and compilers do: a new file renamed over the path.
  Overwrite(Program("ptd_prog_vdso"), prog_ + ".new");
  ASSERT_EQ(::rename((prog_ + ".new").c_str(), prog_.c_str()), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(recorder, &status, 0), recorder);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "record failed: status " << status;

  EXPECT_EQ(ProgramEntry(trace).build_id, *original_id);
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->build_ids[prog_], *original_id);
  const ArchiveDecode decoded = Decode(trace);
  EXPECT_EQ(decoded.exit_code, 0) << decoded.err;
  EXPECT_EQ(decoded.errors, 0) << decoded.err;
  EXPECT_GT(decoded.calls, 1000);
  EXPECT_THAT(decoded.ftf, HasSubstr("step"));  // the program's own function, by name
}

// A damaged entry: a clear warning naming it, then the file at the path (intact here)
// is read, and everything decodes.
TEST_F(TraceArchiveTest, DamagedEntriesWarnAndFallBackToThePath) {
  const std::string trace = Record("trace", "ptrace");
  const ArchiveDecode before = Decode(trace);
  ASSERT_EQ(before.errors, 0) << before.err;
  const ArchivedFile entry = ProgramEntry(trace);
  const std::string copy = ResolveTracePath(trace, entry.file);
  absl::StatusOr<std::string> bytes = ReadFileToString(copy);
  ASSERT_TRUE(bytes.ok());

  // Truncated: the build-id note survives (it is near the start), the code does not.
  ASSERT_EQ(::unlink(copy.c_str()), 0);  // never write through the cache's hard link
  ASSERT_TRUE(WriteFileAtomic(copy, std::string_view(*bytes).substr(0, bytes->size() / 2)).ok());
  ArchiveDecode truncated = Decode(trace);
  EXPECT_THAT(truncated.err, HasSubstr(absl::StrCat("archived copy of ", prog_, " is damaged")));
  EXPECT_THAT(truncated.err, HasSubstr("truncated"));
  ExpectSameDecode(truncated, before);

  // Another program under this build-id's name.
  ASSERT_EQ(::unlink(copy.c_str()), 0);
  Overwrite(Program("ptd_prog_vdso"), copy);
  ArchiveDecode wrong = Decode(trace);
  EXPECT_THAT(wrong.err, HasSubstr(absl::StrCat("archived copy of ", prog_, " is damaged")));
  EXPECT_THAT(wrong.err, HasSubstr(absl::StrCat("expected ", entry.build_id)));
  ExpectSameDecode(wrong, before);

  // Not an ELF file at all, and missing.
  ASSERT_EQ(::unlink(copy.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomic(copy, std::string_view("junk")).ok());
  ArchiveDecode junk = Decode(trace);
  EXPECT_THAT(junk.err, HasSubstr("is damaged"));
  ExpectSameDecode(junk, before);
  ASSERT_EQ(::unlink(copy.c_str()), 0);
  ArchiveDecode missing = Decode(trace);
  EXPECT_THAT(missing.err, HasSubstr("is damaged"));
  ExpectSameDecode(missing, before);

  // The cache was never touched: the next recording links its intact copy again.
  const std::string again = Record("again", "ptrace");
  const ArchiveDecode decoded_again = Decode(again);
  EXPECT_EQ(decoded_again.exit_code, 0) << decoded_again.err;
  EXPECT_EQ(decoded_again.errors, 0);
  EXPECT_THAT(decoded_again.err, Not(HasSubstr("damaged")));
  EXPECT_EQ(ReadFileToString(ResolveTracePath(again, ProgramEntry(again).file)).value_or(""), *bytes);
}

}  // namespace
}  // namespace ptd::testing
