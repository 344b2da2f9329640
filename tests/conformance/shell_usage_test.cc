// `ptrace-direct record` used the way people use commands in a shell, under Valgrind:
// stdin from a pipe, an interactive terminal, inside and around a pipeline, make running
// gcc. Each run shows what the same command shows without the tool (stdout, stderr, exit
// status, files written), and the trace holds every process it ran, decoded without error.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

class ShellUsageTest : public ValgrindRecordingTest<> {
 protected:
  // `line` run by sh in the temp directory.
  CommandResult Shell(const std::string& line) {
    return RunCommand({"/bin/sh", "-c", absl::StrCat("cd '", tmp_.path(), "' && ", line)});
  }
  // The shell words that record into DIR (relative to the temp directory).
  std::string Record(const std::string& dir) const {
    return absl::StrCat("'", CliPath(), "' record --emulate=valgrind -q -o ", dir, " --");
  }
  // The trace in DIR decoded: no errors, and the process names it holds.
  std::map<std::string, int> DecodedProcesses(const std::string& dir) {
    absl::StatusOr<DecodedTrace> decoded = DecodeForTest(tmp_.Sub(dir));
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    std::map<std::string, int> names;
    if (!decoded.ok()) return names;
    EXPECT_EQ(decoded->errors, 0u) << (decoded->error_details.empty() ? "" : decoded->error_details[0]);
    for (const auto& [tid, name] : decoded->threads) ++names[name];
    return names;
  }
  static void ExpectSame(const CommandResult& native, const CommandResult& traced) {
    EXPECT_EQ(traced.out, native.out);
    EXPECT_EQ(traced.err, native.err);
    EXPECT_EQ(traced.exit_code, native.exit_code);
  }
};

TEST_F(ShellUsageTest, StdinFromAPipeReachesTheProgram) {
  const std::string input = "printf 'pear\\napple\\nfig\\n' | ";
  const CommandResult native = Shell(input + "sort");
  ASSERT_EQ(native.out, "apple\nfig\npear\n");
  ExpectSame(native, Shell(absl::StrCat(input, Record("t.dir"), " sort")));
  EXPECT_EQ(DecodedProcesses("t.dir").count("sort"), 1u);
}

// A terminal on stdin, stdout and stderr (script(1) runs the command on a new pty, as a
// terminal or tmux would): the program sees a terminal, not a pipe.
TEST_F(ShellUsageTest, AnInteractiveTerminalIsTheProgramsTerminal) {
  if (!PathExists("/usr/bin/script")) GTEST_SKIP() << "script(1) (bsdutils) not installed";
  const std::string probe = "sh -c 'test -t 0 && test -t 1 && test -t 2 && echo on a terminal'";
  const auto in_pty = [&](const std::string& command) {
    return Shell(absl::StrCat("/usr/bin/script -qec \"", command, "\" /dev/null < /dev/null"));
  };
  const CommandResult native = in_pty(probe);
  ASSERT_TRUE(absl::StrContains(native.out, "on a terminal")) << native.out << native.err;
  const CommandResult traced = in_pty(absl::StrCat(Record("t.dir"), " ", probe));
  EXPECT_EQ(traced.out, native.out);
  EXPECT_EQ(traced.exit_code, 0);
  EXPECT_EQ(DecodedProcesses("t.dir").count("sh"), 1u);
}

// record inside a pipeline (its stdout is the program's, nothing of the recorder's) and a
// pipeline inside record (every process of it recorded).
TEST_F(ShellUsageTest, PipelinesAroundAndInsideTheRecording) {
  const std::string pipeline = "sh -c 'grep 7 | sort -r'";
  const CommandResult native = Shell(absl::StrCat("seq 1 80 | ", pipeline, " | wc -l"));
  ASSERT_EQ(native.out, "17\n");
  ExpectSame(native, Shell(absl::StrCat("seq 1 80 | ", Record("t.dir"), " ", pipeline, " | wc -l")));
  const std::map<std::string, int> processes = DecodedProcesses("t.dir");
  EXPECT_EQ(processes.count("grep"), 1u);
  EXPECT_EQ(processes.count("sort"), 1u);
}

// make running gcc on three files and linking them: the same objects and program are
// built, and every compiler process is in the trace.
TEST_F(ShellUsageTest, MakeRunningGccOnThreeFiles) {
  if (!PathExists("/usr/bin/make") || !PathExists("/usr/bin/gcc")) GTEST_SKIP() << "make or gcc not installed";
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(WriteFileAtomic(tmp_.Sub(absl::StrCat(name, ".c")),
                                absl::StrCat("int ", name, "(int x) { return x + 1; }\n"))
                    .ok());
  }
  ASSERT_TRUE(WriteFileAtomic(tmp_.Sub("main.c"),
                              std::string_view("#include <stdio.h>\nint a(int); int b(int); int c(int);\n"
                                               "int main(void) { printf(\"%d\\n\", a(b(c(0)))); return 0; }\n"))
                  .ok());
  ASSERT_TRUE(WriteFileAtomic(tmp_.Sub("Makefile"),
                              std::string_view("prog: main.c a.o b.o c.o\n\tgcc -O0 -o $@ main.c a.o b.o c.o\n"
                                               "%.o: %.c\n\tgcc -O0 -c -o $@ $<\n"))
                  .ok());
  const CommandResult native = Shell("make -s && ./prog");
  ASSERT_EQ(native.out, "3\n") << native.err;
  ASSERT_EQ(Shell("rm -f prog a.o b.o c.o").exit_code, 0);
  ExpectSame(native, Shell(absl::StrCat(Record("t.dir"), " make -s && ./prog")));
  for (const char* built : {"a.o", "b.o", "c.o", "prog"}) EXPECT_TRUE(PathExists(tmp_.Sub(built))) << built;
  const std::map<std::string, int> processes = DecodedProcesses("t.dir");
  EXPECT_EQ(processes.count("make"), 1u);
  auto cc1 = processes.find("cc1");
  ASSERT_NE(cc1, processes.end()) << "no compiler process in the trace";
  EXPECT_EQ(cc1->second, 4);  // a.c, b.c, c.c, main.c
}

}  // namespace
}  // namespace ptd::testing
