// Bad input (docs/robustness.md): damaged trace directories, binaries that are gone or
// changed since the recording, pids that are not there, permissions, an existing output
// directory. Each checks the message (file or pid named, problem named), the exit status,
// and that nothing recorded is lost or left half-written.
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recorder/target/target_process.h"
#include "tests/robustness/child_process.h"
#include "tests/robustness/robustness_util.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const char kSpin[] = "ptd_core_spin_target";

// A short emulated recording of the loop program (200 rounds).
// `archive` false: --no-archive, so decode reads the program from its path (the tests of
// missing and changed binaries; an archived trace does not need them: trace_archive_test).
std::string RecordSmall(const TempDir& tmp, const std::string& program, bool archive = true) {
  const std::string dir = tmp.Sub("trace.dir");
  // --time=wall: the wall clock's timing packets (a single step takes microseconds) give
  // the PT a few KB for the tests to cut and overwrite; on the virtual axis the spin loop's
  // is a few hundred bytes.
  std::vector<std::string> args = {"record", "--emulate=ptrace", "--time=wall", "-q", "-o", dir};
  if (!archive) args.push_back("--no-archive");
  args.insert(args.end(), {"--", program, tmp.Sub("target.pid"), "200"});
  CommandResult r = RunCli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir;
}

std::string StreamFile(const std::string& dir) {
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(dir);
  EXPECT_TRUE(meta.ok()) << meta.status();
  if (!meta.ok() || meta->streams.empty()) return "";
  return meta->streams[0].file;
}

std::string KernelSidebandFile(const std::string& dir) {
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(dir);
  if (!meta.ok()) return "";
  for (const SidebandFile& s : meta->sideband) {
    if (s.origin == "kernel" && FileSizeOf(dir + "/" + s.file) > 64) return s.file;
  }
  return "";
}

// One file of a small recording of the loop program, which a test then damages: its
// name as meta.json has it, its path and its size.
struct RecordedFile {
  std::string dir;
  std::string name;
  std::string path;
  long long size = 0;
};

RecordedFile RecordSpinAndPick(const TempDir& tmp, std::string (*pick)(const std::string& dir)) {
  RecordedFile file;
  file.dir = RecordSmall(tmp, CoreProgram(kSpin));
  file.name = pick(file.dir);
  EXPECT_FALSE(file.name.empty()) << "no such file in " << file.dir;
  file.path = file.dir + "/" + file.name;
  if (!file.name.empty()) file.size = FileSizeOf(file.path);
  return file;
}

void Truncate(const std::string& path, long long size) {
  std::filesystem::resize_file(path, static_cast<uintmax_t>(size));
}

void Overwrite(const std::string& path, long long offset, const std::string& bytes) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  text->replace(static_cast<size_t>(offset), bytes.size(), bytes);
  ASSERT_TRUE(WriteFileAtomic(path, *text).ok());
}

// Not a crash: an ordinary exit status (a signal would be 128+N).
void ExpectNoCrash(const CommandResult& r) { EXPECT_LT(r.exit_code, 128) << r.err; }

// A refused input: exit 1 (failure) or 2 (the input is invalid), never a crash.
void ExpectRefused(const CommandResult& r, const std::string& what) {
  EXPECT_THAT(r.exit_code, AnyOf(1, 2)) << what << ": " << r.err;
}

TEST(BadInputTest, TruncatedAuxFileDecodesWhatIsThereAndSaysSo) {
  TempDir tmp;
  const RecordedFile aux = RecordSpinAndPick(tmp, StreamFile);
  ASSERT_FALSE(aux.name.empty());
  const std::string& dir = aux.dir;
  DecodeOutcome before = Decode(dir, tmp.Sub("before.ftf"));
  ASSERT_TRUE(before.ok);
  Truncate(aux.path, aux.size / 2);

  DecodeOutcome after = Decode(dir, tmp.Sub("after.ftf"));
  ASSERT_TRUE(after.ok);
  EXPECT_THAT(after.run.err, HasSubstr(aux.name)) << "the warning names the file";
  EXPECT_THAT(after.run.err, HasSubstr("reaches past the file's end"));
  const int64_t insns_before = before.stats.value("instructions", int64_t{0});
  const int64_t insns_after = after.stats.value("instructions", int64_t{0});
  EXPECT_GT(insns_after, 0) << "the first half still decodes";
  EXPECT_LT(insns_after, insns_before);

  CommandResult info = RunCli({"info", dir});
  ExpectNoCrash(info);
  EXPECT_EQ(info.exit_code, 0) << info.err;
}

// One thread's PT file gone (a copy that lost a file): the others still decode, the
// thread's track and the warning say its trace is missing, and `info` says MISSING.
TEST(BadInputTest, MissingAuxFileOfOneThreadDecodesTheOthersAndMarksIt) {
  TempDir tmp;
  const std::string dir = tmp.Sub("trace.dir");
  ChildResult record = RunChild({CliPath(), "record", "--emulate=ptrace", "-q", "-o", dir, "--",
                                 CoreProgram("ptd_core_fork_exec_target")});
  ASSERT_TRUE(PathExists(dir + "/meta.json")) << record.err;
  nlohmann::json info = InfoJson(dir);
  const int parent = info["pids"][0].get<int>();
  std::string child_file;
  int child = -1;
  for (const nlohmann::json& s : info["streams"]) {
    if (s["tid"].get<int>() != parent) {
      child_file = s["file"].get<std::string>();
      child = s["tid"].get<int>();
    }
  }
  ASSERT_FALSE(child_file.empty()) << info["streams"].dump();
  ASSERT_EQ(::unlink((dir + "/" + child_file).c_str()), 0);

  // Exit 1 (something the trace held is gone), with a valid file of what remains.
  DecodeOutcome decoded = Decode(dir, tmp.Sub("out.ftf"), 1);
  EXPECT_THAT(decoded.run.err, HasSubstr(absl::StrCat(child_file, " is missing: thread ", child, " is not decoded")));
  EXPECT_EQ(CallsOf(decoded.summary, "parent_work"), 10u) << "the parent still decodes";
  EXPECT_EQ(CallsOf(decoded.summary, "child_work"), 0u);
  bool marked = false;
  for (const ThreadSummary& t : decoded.summary.threads) {
    if (t.tid == static_cast<uint64_t>(child)) marked = t.instants > 0;
  }
  EXPECT_TRUE(marked) << "the child's track carries the 'trace missing' instant";

  CommandResult text = RunCli({"info", dir});
  EXPECT_THAT(text.out, HasSubstr("MISSING"));
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("-1 bytes")));
}

// A sideband file gone: decode says which and what that costs, exits 1, and still writes
// a valid file.
TEST(BadInputTest, MissingSidebandFileIsNamedAndTheDecodeExitsOne) {
  TempDir tmp;
  const std::string dir = RecordSmall(tmp, CoreProgram(kSpin));
  const std::string sideband = KernelSidebandFile(dir);
  ASSERT_FALSE(sideband.empty());
  ASSERT_EQ(::unlink((dir + "/" + sideband).c_str()), 0);
  const std::string out = tmp.Sub("out.ftf");
  CommandResult r = RunCli({"decode", dir, "-o", out, "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(sideband + " is missing from "));
  EXPECT_THAT(r.err, HasSubstr("memory maps"));
  EXPECT_TRUE(CheckFtfFileOk(out));
}

TEST(BadInputTest, CorruptAuxBytesAreDecodeErrorsNotACrash) {
  TempDir tmp;
  const RecordedFile aux = RecordSpinAndPick(tmp, StreamFile);
  // 4.1 to 6.2 KB: the timing packets vary with the machine's load (4086 bytes once under
  // ctest -j2); what matters is good bytes on both sides of the 512 corrupted ones.
  ASSERT_GT(aux.size, 2048);
  // 512 bytes of 0xff in the middle: not valid packets.
  Overwrite(aux.path, aux.size / 2, std::string(512, '\xff'));
  DecodeOutcome decoded = Decode(aux.dir, tmp.Sub("out.ftf"));
  ASSERT_TRUE(decoded.ok);
  EXPECT_GT(decoded.stats.value("errors", int64_t{0}), 0) << decoded.stats.dump();
  EXPECT_GT(decoded.stats.value("instructions", int64_t{0}), 0);
}

TEST(BadInputTest, TruncatedSidebandFileIsNamedWithItsOffset) {
  TempDir tmp;
  const RecordedFile file = RecordSpinAndPick(tmp, KernelSidebandFile);
  ASSERT_FALSE(file.name.empty());
  const std::string& dir = file.dir;
  const std::string& sideband = file.name;
  Truncate(file.path, file.size - 3);  // ends inside a record

  CommandResult info = RunCli({"info", dir});
  EXPECT_EQ(info.exit_code, 1) << info.err;
  EXPECT_THAT(info.err, HasSubstr(sideband));
  EXPECT_THAT(info.out, HasSubstr("threads")) << "what could be read is still printed";

  CommandResult decode = RunCli({"decode", dir, "-o", tmp.Sub("out.ftf"), "-q"});
  ExpectNoCrash(decode);
  EXPECT_EQ(decode.exit_code, 0) << decode.err;
  EXPECT_THAT(decode.err, HasSubstr(sideband));
  EXPECT_TRUE(CheckFtfFileOk(tmp.Sub("out.ftf")));
}

TEST(BadInputTest, CorruptMetaJsonIsNamed) {
  TempDir tmp;
  const std::string dir = RecordSmall(tmp, CoreProgram(kSpin));
  const std::string meta = dir + "/meta.json";
  absl::StatusOr<std::string> text = ReadFileToString(meta);
  ASSERT_TRUE(text.ok());

  // Cut in half: not JSON.
  ASSERT_TRUE(WriteFileAtomic(meta, text->substr(0, text->size() / 2)).ok());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"info", dir}, {"decode", dir, "-o", tmp.Sub("a.ftf"), "-q"}}) {
    CommandResult r = RunCli(args);
    ExpectRefused(r, args[0]);
    EXPECT_THAT(r.err, HasSubstr(meta)) << args[0];
    EXPECT_THAT(r.err, HasSubstr("not valid JSON")) << args[0];
  }
  EXPECT_FALSE(PathExists(tmp.Sub("a.ftf"))) << "no half-written output";

  // Valid JSON, wrong type in a field: the field is named.
  std::string bad = *text;
  const size_t at = bad.find("\"per\": \"thread\"");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 15, "\"per\": 17");
  ASSERT_TRUE(WriteFileAtomic(meta, bad).ok());
  CommandResult r = RunCli({"decode", dir, "-o", tmp.Sub("b.ftf"), "-q"});
  ExpectRefused(r, "decode");
  EXPECT_THAT(r.err, HasSubstr("field 'per'"));

  // Gone.
  ASSERT_TRUE(RemoveTree(meta).ok());
  r = RunCli({"info", dir});
  ExpectRefused(r, "info");
  EXPECT_THAT(r.err, HasSubstr("not a trace directory (no meta.json)"));
}

TEST(BadInputTest, MissingBinaryIsNamedAndTheRestStillDecodes) {
  TempDir tmp;
  const std::string copy = tmp.Sub("spin-copy");
  std::filesystem::copy_file(CoreProgram(kSpin), copy);
  std::filesystem::permissions(copy, std::filesystem::perms::owner_all);
  const std::string dir = RecordSmall(tmp, copy, /*archive=*/false);
  ASSERT_TRUE(RemoveTree(copy).ok());

  CommandResult decode = RunCli({"decode", dir, "-o", tmp.Sub("out.ftf"), "-q"});
  EXPECT_EQ(decode.exit_code, 0) << decode.err;
  EXPECT_THAT(decode.err, HasSubstr(copy));
  EXPECT_THAT(decode.err, HasSubstr("1 binary not found"));
  EXPECT_TRUE(CheckFtfFileOk(tmp.Sub("out.ftf")));
}

TEST(BadInputTest, ChangedBinaryIsNamedWithBothBuildIds) {
  TempDir tmp;
  const std::string copy = tmp.Sub("spin-copy");
  std::filesystem::copy_file(CoreProgram(kSpin), copy);
  const std::string dir = RecordSmall(tmp, copy, /*archive=*/false);
  // Another build under the same name (a new file, as an install would make).
  ASSERT_TRUE(RemoveTree(copy).ok());
  std::filesystem::copy_file(CoreProgram("ptd_core_fork_exec_target"), copy);

  CommandResult decode = RunCli({"decode", dir, "-o", tmp.Sub("out.ftf"), "-q"});
  EXPECT_EQ(decode.exit_code, 0) << decode.err;
  EXPECT_THAT(decode.err, HasSubstr(copy));
  EXPECT_THAT(decode.err, HasSubstr("no longer matches the traced file (build-id"));
  EXPECT_TRUE(CheckFtfFileOk(tmp.Sub("out.ftf")));
}

// No directory and no staging directory may be left after a refused attach.
void ExpectNothingLeft(const TempDir& tmp) {
  EXPECT_FALSE(PathExists(tmp.Sub("trace.dir")));
  EXPECT_THAT(ListWithPrefix(tmp.path(), "trace.dir.partial"), IsEmpty());
}

TEST(BadInputTest, PidThatDoesNotExist) {
  TempDir tmp;
  // A pid that was just freed (reaped): nothing has it.
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  waitpid(gone, nullptr, 0);
  CommandResult r = RunCli({"record", "--emulate=ptrace", "-q", "--pid", std::to_string(gone), "-o", tmp.Sub("trace.dir")});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("no process with pid ", gone)));
  ExpectNothingLeft(tmp);
}

TEST(BadInputTest, PidThatHasExitedButIsNotReaped) {
  TempDir tmp;
  pid_t zombie = fork();
  if (zombie == 0) _exit(0);
  ASSERT_GT(zombie, 0);
  // It is a zombie once waitid with WNOWAIT sees it exit.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);
  CommandResult r = RunCli({"record", "--emulate=ptrace", "-q", "--pid", std::to_string(zombie), "-o", tmp.Sub("trace.dir")});
  waitpid(zombie, nullptr, 0);
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("process ", zombie, " has exited")));
  ExpectNothingLeft(tmp);
}

// Processes that end on their own while the recorder attaches (a real race, so each
// attempt may land anywhere): either a complete directory or a clear error and nothing.
TEST(BadInputTest, PidThatExitsDuringAttach) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    TempDir tmp;
    // Native speed: 5 to 40 million rounds end within ~15 to ~120 ms, around the time
    // the recorder needs to start and attach.
    ChildProcess target({CoreProgram(kSpin), tmp.Sub("target.pid"), std::to_string(5000000L << attempt)});
    CommandResult r = RunCli({"record", "--emulate=ptrace", "-q", "--duration", "1", "--pid",
                              std::to_string(target.pid()), "-o", tmp.Sub("trace.dir")});
    target.Wait();
    ExpectNoCrash(r);
    if (r.exit_code == 0) {
      EXPECT_TRUE(PathExists(tmp.Sub("trace.dir/meta.json")));
      EXPECT_THAT(ListWithPrefix(tmp.path(), "trace.dir.partial"), IsEmpty());
      EXPECT_EQ(RunCli({"info", tmp.Sub("trace.dir")}).exit_code, 0);
    } else {
      EXPECT_EQ(r.exit_code, 125);
      EXPECT_THAT(r.err, HasSubstr(std::to_string(target.pid()))) << "the pid is named";
      ExpectNothingLeft(tmp);
    }
  }
}

TEST(BadInputTest, PtraceRefusedNamesTracerPtraceScopeAndCapSysPtrace) {
  // The mapping itself.
  absl::Status eperm = PtraceAttachError(EPERM, 10, 11);
  EXPECT_TRUE(absl::IsPermissionDenied(eperm));
  EXPECT_THAT(eperm.message(), HasSubstr("thread 11 of process 10"));
  EXPECT_THAT(eperm.message(), HasSubstr("ptrace_scope"));
  EXPECT_THAT(eperm.message(), HasSubstr("CAP_SYS_PTRACE"));
  absl::Status esrch = PtraceAttachError(ESRCH, 10, 10);
  EXPECT_TRUE(absl::IsNotFound(esrch));
  EXPECT_THAT(esrch.message(), HasSubstr("process 10: it exited during the attach"));

  // A real refusal: the target already has a tracer (this test), so PTRACE_ATTACH fails
  // with EPERM even for root.
  TempDir tmp;
  const std::string pidfile = tmp.Sub("target.pid");
  pid_t target = fork();
  if (target == 0) {
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    const std::string program = CoreProgram(kSpin);
    execl(program.c_str(), program.c_str(), pidfile.c_str(), "1000000000", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(target, 0);
  int status = 0;
  ASSERT_EQ(waitpid(target, &status, 0), target);  // the exec stop
  ASSERT_TRUE(WIFSTOPPED(status));
  ASSERT_EQ(ptrace(PTRACE_CONT, target, nullptr, nullptr), 0);
  ASSERT_TRUE(WaitForFile(pidfile));
  CommandResult r = RunCli({"record", "--emulate=ptrace", "-q", "--pid", std::to_string(target), "-o", tmp.Sub("trace.dir")});
  kill(target, SIGKILL);
  waitpid(target, nullptr, 0);
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("process ", target)));
  EXPECT_THAT(r.err, HasSubstr("CAP_SYS_PTRACE"));
  EXPECT_THAT(r.err, HasSubstr("ptrace_scope"));
  ExpectNothingLeft(tmp);
}

// perf_event_open refused: another user's process, recorded by an unprivileged user.
TEST(BadInputTest, PerfEventOpenRefusedNamesParanoidAndCapPerfmon) {
  TempDir tmp;
  ChildProcess target({CoreProgram(kSpin), tmp.Sub("target.pid"), "1000000000"});
  ASSERT_TRUE(WaitForFile(tmp.Sub("target.pid")));
  ChildOptions options;
  if (getuid() == 0) {
    options.uid = 65534;  // nobody
    ASSERT_EQ(chmod(tmp.path().c_str(), 0777), 0);
  } else if (access("/proc/1/maps", R_OK) == 0) {
    GTEST_SKIP() << "cannot find a process this user may not record";
  }
  // As root: this test's child, recorded by nobody. Not root: the child is ours, so
  // record init instead.
  const int pid = getuid() == 0 ? target.pid() : 1;
  ChildResult r = RunChild({CliPath(), "record", "--emulate=ptrace", "-q", "--pid", std::to_string(pid), "-o",
                            tmp.Sub("trace.dir")},
                           options);
  if (r.exit_code == 126) GTEST_SKIP() << "could not switch to user nobody";
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_THAT(r.err, HasSubstr("perf_event_open"));
  EXPECT_THAT(r.err, HasSubstr("Permission denied"));
  EXPECT_THAT(r.err, HasSubstr("perf_event_paranoid"));
  EXPECT_THAT(r.err, HasSubstr("CAP_PERFMON"));
  ExpectNothingLeft(tmp);
}

TEST(BadInputTest, ExistingOutputDirectoryIsRefusedWithoutForce) {
  TempDir tmp;
  const std::string dir = tmp.Sub("trace.dir");
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/precious", std::string("keep")).ok());
  CommandResult r = RunCli({"record", "--emulate=ptrace", "-q", "-o", dir, "--", CoreProgram(kSpin),
                            tmp.Sub("target.pid"), "10"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_THAT(r.err, HasSubstr(dir + ": already exists"));
  EXPECT_THAT(r.err, HasSubstr("--force"));
  EXPECT_TRUE(PathExists(dir + "/precious")) << "left alone";
  EXPECT_FALSE(PathExists(tmp.Sub("target.pid"))) << "nothing was launched";

  r = RunCli({"record", "--emulate=ptrace", "-q", "--force", "-o", dir, "--", CoreProgram(kSpin),
              tmp.Sub("target.pid"), "10"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(PathExists(dir + "/precious"));
  EXPECT_TRUE(PathExists(dir + "/meta.json"));
}

}  // namespace
}  // namespace ptd::testing
