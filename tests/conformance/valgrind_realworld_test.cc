// Real programs recorded with the Valgrind backend the way people run them: a shell
// shim that changes directory and execs (like pyenv's), a daemon that double-forks and
// closes its fds, a setuid program, a recording stopped while the program runs. Each is compared with the
// same program run without the tool, and with counts from its source.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

// The names in `dir`, sorted.
std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// `command` run by sh in `dir` (a user's shell in their working directory).
CommandResult RunIn(const std::string& dir, const std::string& command) {
  return RunCommand({"/bin/sh", "-c", absl::StrCat("cd '", dir, "' && ", command)});
}

// The lines of `err` the recorder wrote ("ptrace-direct: ..."), and in `program_err` the rest.
std::vector<std::string> RecorderLines(const std::string& err, std::string* program_err) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(err, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "ptrace-direct: ")) {
      lines.emplace_back(line);
    } else {
      absl::StrAppend(program_err, line, "\n");
    }
  }
  return lines;
}

class ValgrindRealWorldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!ValgrindAvailable(&why)) GTEST_SKIP() << why;
  }
  // `record --emulate=valgrind -q -o trace.dir [options] -- command`, run in tmp_.
  std::string RecordCommand(const std::string& options, const std::string& command) const {
    return absl::StrCat("exec '", CliPath(), "' record --emulate=valgrind -q -o trace.dir ", options, " -- ",
                        command);
  }

  // A setuid copy of /bin/echo in tmp_ (Valgrind refuses to run it, even for root).
  // Its path, or empty with `why` when the file system keeps no setuid bit.
  std::string SetuidEcho(std::string* why) const {
    const std::string path = tmp_.Sub("setuid_echo");
    absl::StatusOr<std::string> bytes = ReadFileToString("/bin/echo");
    if (!bytes.ok() || !WriteFileAtomic(path, *bytes).ok() || chmod(path.c_str(), 04755) != 0) {
      *why = "cannot make a setuid copy of /bin/echo in " + tmp_.path();
      return "";
    }
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || (st.st_mode & S_ISUID) == 0) {
      *why = "the file system of " + tmp_.path() + " keeps no setuid bit";
      return "";
    }
    // On a nosuid mount the kernel ignores the bit, but Valgrind still refuses the file
    // by its mode: the case is the same for the recorder.
    struct statvfs fs;
    if (statvfs(tmp_.path().c_str(), &fs) == 0 && (fs.f_flag & ST_NOSUID) != 0) {
      printf("note: %s is mounted nosuid (the kernel ignores the bit; Valgrind does not)\n", tmp_.path().c_str());
    }
    return path;
  }

  // A shell that runs `program` (in tmp_, a copy of echo Valgrind refuses to run): the
  // `command` run in tmp_ with and without the tool: the same stdout, exit status and
  // stderr (but for the recorder's lines, of which there is exactly one and it holds
  // `said`); `info` of the trace holds `noted`. Returns the untraced run.
  CommandResult ExpectAsUntracedSayingOnce(const std::string& command, const std::string& said,
                                           const std::string& noted) const {
    const CommandResult untraced = RunIn(tmp_.path(), command);
    const CommandResult traced = RunIn(tmp_.path(), RecordCommand("", command));
    EXPECT_EQ(traced.out, untraced.out);
    EXPECT_EQ(traced.exit_code, untraced.exit_code);
    std::string program_err;
    const std::vector<std::string> lines = RecorderLines(traced.err, &program_err);
    EXPECT_EQ(program_err, untraced.err);
    EXPECT_EQ(lines.size(), 1u) << traced.err;
    if (!lines.empty()) {
      EXPECT_TRUE(absl::StrContains(lines[0], said)) << lines[0];
    }
    const CommandResult info = RunCli({"info", tmp_.Sub("trace.dir")});
    EXPECT_EQ(info.exit_code, 0) << info.err;
    EXPECT_TRUE(absl::StrContains(info.out, noted)) << info.out;
    return untraced;
  }

  // program runs untraced, as it does without the tool; the recorder says so once, the
  // trace's notes name it, and the shell's own work decodes without errors.
  void ExpectChildRunsUntracedAndIsNamedOnce(const std::string& program) const {
    const std::string& dir = tmp_.path();
    const std::string script = absl::StrCat("'./", program, " hello; echo status $?'");
    const CommandResult untraced = ExpectAsUntracedSayingOnce(
        absl::StrCat("/bin/sh -c ", script), absl::StrCat(program, " (pid"),
        absl::StrCat("./", program, ", which ran untraced (setuid, setgid or with file capabilities"));
    EXPECT_EQ(untraced.out, "hello\nstatus 0\n");
    absl::StatusOr<DecodedTrace> decoded = DecodeForTest(dir + "/trace.dir");
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->errors, 0u) << (decoded->error_details.empty() ? "" : decoded->error_details[0]);
    EXPECT_GT(decoded->instructions, 0u);
    EXPECT_EQ(decoded->threads.size(), 2u);  // the shell, and its child up to the exec
  }

  TempDir tmp_;
};

// A shim that cds and execs its helpers (pyenv's python3) behaves as it does untraced,
// with a relative -o: everything the recorder hands the program is absolute.
TEST_F(ValgrindRealWorldTest, ShimThatChangesDirectoryBehavesAsUntraced) {
  ASSERT_TRUE(WriteFileAtomic(tmp_.Sub("shim.sh"),
                              std::string_view("#!/bin/sh\n"
                                               "cd /\n"
                                               "exec /bin/sh -c 'echo from the helper in $(pwd)'\n"))
                  .ok());
  ASSERT_EQ(chmod(tmp_.Sub("shim.sh").c_str(), 0755), 0);
  const CommandResult untraced = RunIn(tmp_.path(), "./shim.sh");
  ASSERT_EQ(untraced.exit_code, 0);
  ASSERT_EQ(untraced.out, "from the helper in /\n");

  const CommandResult traced = RunIn(tmp_.path(), RecordCommand("", "./shim.sh"));
  EXPECT_EQ(traced.out, untraced.out);
  EXPECT_EQ(traced.err, untraced.err);
  EXPECT_EQ(Listing(tmp_.path()), (std::vector<std::string>{"shim.sh", "trace.dir"}));
}

// A daemon (double fork, the middle process gone at once, every fd closed, work after
// a sleep longer than any quiet period) is followed until it exits: its work is in the
// trace, decoded without error, call for call as its source makes them.
TEST_F(ValgrindRealWorldTest, DaemonThatClosesItsFdsIsRecordedUntilItExits) {
  constexpr int kCalls = 20;
  const CommandResult untraced =
      RunCommand({PTD_DAEMONIZING_PROGRAM, tmp_.Sub("untraced.out"), "10", absl::StrCat(kCalls)});
  ASSERT_EQ(untraced.exit_code, 0);
  absl::StatusOr<std::string> expected = ReadFileToString(tmp_.Sub("untraced.out"));
  for (int waited = 0; waited < 100 && (!expected.ok() || expected->empty()); ++waited) {
    usleep(100000);
    expected = ReadFileToString(tmp_.Sub("untraced.out"));
  }
  ASSERT_TRUE(expected.ok() && !expected->empty()) << "the untraced daemon wrote nothing within 10 s";

  const RecordOptions options = EmulatedRecordOptions(
      {PTD_DAEMONIZING_PROGRAM, tmp_.Sub("traced.out"), "1500", absl::StrCat(kCalls)}, tmp_.path(), "valgrind");
  const DecodedRecording rec = RecordAndDecodeForTest(RecordValgrind, options);
  ASSERT_FALSE(rec.dir.empty());
  // The recording ended after the daemon did: its output is there already.
  absl::StatusOr<std::string> traced = ReadFileToString(tmp_.Sub("traced.out"));
  ASSERT_TRUE(traced.ok()) << traced.status();
  EXPECT_EQ(*traced, *expected);
  EXPECT_EQ(rec.decoded.errors, 0u) << (rec.decoded.error_details.empty() ? "" : rec.decoded.error_details[0]);
  EXPECT_EQ(rec.decoded.instructions, rec.summary.instructions);
  auto found = rec.decoded.calls.find("daemon_work");
  ASSERT_NE(found, rec.decoded.calls.end()) << "the daemon's work is not in the trace";
  EXPECT_EQ(found->second, static_cast<uint64_t>(kCalls));
  EXPECT_EQ(rec.decoded.threads.size(), 3u);  // the launched process, the middle one, the daemon
}

TEST_F(ValgrindRealWorldTest, SetuidChildRunsUntracedAndIsNamedOnce) {
  std::string why;
  if (SetuidEcho(&why).empty()) GTEST_SKIP() << why;
  ExpectChildRunsUntracedAndIsNamedOnce("setuid_echo");
}

// File capabilities (setcap) make Valgrind refuse a program as the setuid bit does.
TEST_F(ValgrindRealWorldTest, ChildWithFileCapabilitiesRunsUntracedAndIsNamedOnce) {
  const std::string path = tmp_.Sub("cap_echo");
  absl::StatusOr<std::string> bytes = ReadFileToString("/bin/echo");
  ASSERT_TRUE(bytes.ok() && WriteFileAtomic(path, *bytes).ok() && chmod(path.c_str(), 0755) == 0);
  const CommandResult setcap = RunCommand({"/bin/sh", "-c", "setcap cap_net_raw+ep \"$0\"", path});
  if (setcap.exit_code != 0) GTEST_SKIP() << "cannot give " << path << " a file capability: " << setcap.err;
  ExpectChildRunsUntracedAndIsNamedOnce("cap_echo");
}

// A setuid program launched by the recorder itself runs as it does without the tool.
TEST_F(ValgrindRealWorldTest, LaunchedSetuidProgramBehavesAsUntraced) {
  std::string why;
  const std::string setuid_echo = SetuidEcho(&why);
  if (setuid_echo.empty()) GTEST_SKIP() << why;
  const CommandResult untraced =
      ExpectAsUntracedSayingOnce("./setuid_echo hello", "setuid_echo", "ran untraced (setuid");
  EXPECT_EQ(untraced.out, "hello\n");
}

// A recording stopped while the program runs (--duration; Ctrl-C and --control stop end
// the same way) leaves the trace and nothing of Valgrind's beside it or in its notes.
TEST_F(ValgrindRealWorldTest, StopWhileTheProgramRunsLeavesOnlyTheTrace) {
  const CommandResult traced = RunIn(tmp_.path(), RecordCommand("--duration 1", "/bin/sleep 3"));
  EXPECT_EQ(traced.err, "");
  EXPECT_EQ(Listing(tmp_.path()), std::vector<std::string>{"trace.dir"});
  absl::StatusOr<std::string> meta = ReadFileToString(tmp_.Sub("trace.dir/meta.json"));
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->find(".valgrind-"), std::string::npos) << *meta;
  // The program goes on untraced and finishes; then still nothing else is there.
  sleep(3);
  EXPECT_EQ(Listing(tmp_.path()), std::vector<std::string>{"trace.dir"});
}

// What the user sees of a recording (info, decode's warnings, the decoded trace) shows
// their program, not Valgrind: no tool executable, no preload library, no "//anon" note,
// no frame of the code Valgrind preloads (its constructors, which the loader calls).
TEST_F(ValgrindRealWorldTest, NoValgrindInternalsInInfoDecodeOrTrace) {
  const CommandResult recorded = RunIn(tmp_.path(), RecordCommand("", "/bin/ls /"));
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  EXPECT_EQ(recorded.err, "");
  const CommandResult info = RunCli({"info", tmp_.Sub("trace.dir")});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const CommandResult decoded = RunCli({"decode", tmp_.Sub("trace.dir"), "-o", tmp_.Sub("trace.ftf")});
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
  const CommandResult dump = RunCli({"ftf-dump", tmp_.Sub("trace.ftf")});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  for (const char* internal : {"ptdtrace-", "vgpreload", "not archived", "could not be read", "[unknown@"}) {
    EXPECT_EQ(info.out.find(internal), std::string::npos) << internal << " in info:\n" << info.out;
    EXPECT_EQ(decoded.err.find(internal), std::string::npos) << internal << " in decode:\n" << decoded.err;
    EXPECT_EQ(dump.out.find(internal), std::string::npos) << internal << " in ftf-dump";
  }
}

// Valgrind's own messages (here: a system call it does not know) stay off the program's
// stderr, which is byte for byte what it is without the tool; the recorder says what
// Valgrind said, once, in its own words and in the trace's notes.
TEST_F(ValgrindRealWorldTest, ProgramStderrIsByteIdenticalWithValgrindMessagesSurfacedOnce) {
  const CommandResult untraced =
      ExpectAsUntracedSayingOnce("/usr/bin/perl -e 'syscall(999); print STDERR qq(done\\n); exit 0'",
                                 "unhandled amd64-linux syscall: 999",
                                 "Valgrind: WARNING: unhandled amd64-linux syscall: 999");
  EXPECT_EQ(untraced.err, "done\n");
}

}  // namespace
}  // namespace ptd::testing
