// `record -- CMD` ends as CMD ends: CMD's exit code, or 128 + the signal that killed it,
// with CMD's own stdout and stderr, under every emulation backend; a CMD that cannot be
// run is a failure of the recording (125), named, with nothing recorded.
#include <signal.h>

#include <string>
#include <vector>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"

namespace ptd::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kRecordingFailed = 125;  // docs/cli.md, "Exit status and signals"

class RecordExitStatusTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (std::string why = WhyBackendUnavailable(GetParam()); !why.empty()) GTEST_SKIP() << why;
  }
  // Runs argv natively and recorded; both must show the same, and the status is returned.
  int ExpectRecordedAsNative(const std::vector<std::string>& argv) {
    const std::string trace = tmp_.Sub("trace-" + argv.back());
    const CommandResult native = RunCommand(argv);
    const CommandResult recorded = RecordProgram(GetParam(), trace, argv);
    ExpectSameAsNative(native, recorded, argv.back());
    EXPECT_TRUE(PathExists(trace + "/meta.json")) << argv.back() << ": the trace is committed";
    return native.exit_code;
  }
  TempDir tmp_;
};

TEST_P(RecordExitStatusTest, ExitCodesAreTheTargets) {
  for (const char* code : {"0", "1", "7"}) {
    EXPECT_EQ(ExpectRecordedAsNative({PTD_EXIT_AS, code}), std::stoi(code));
  }
}

TEST_P(RecordExitStatusTest, ASegfaultIs128PlusSigsegv) {
  const std::vector<std::string> argv = {PTD_EXIT_AS, "segv"};
  if (GetParam() == Backend::kValgrind) {
    // Valgrind reports the fault on the program's stderr ("==PID== Process terminating
    // with default action of signal 11"): stdout and the status are checked here, the
    // stderr that Valgrind's own report leaks into is not (a defect of the Valgrind
    // backend: its messages must not reach the program's stderr).
    const CommandResult native = RunCommand(argv);
    const CommandResult recorded = RecordProgram(GetParam(), tmp_.Sub("trace.dir"), argv);
    EXPECT_EQ(recorded.exit_code, 128 + SIGSEGV) << recorded.err;
    EXPECT_EQ(recorded.out, native.out);
    EXPECT_THAT(recorded.err, ::testing::StartsWith(native.err));
    return;
  }
  EXPECT_EQ(ExpectRecordedAsNative(argv), 128 + SIGSEGV);
}

TEST_P(RecordExitStatusTest, AnAbortIs128PlusSigabrt) {
  EXPECT_EQ(ExpectRecordedAsNative({PTD_EXIT_AS, "abort"}), 128 + SIGABRT);
}

TEST_P(RecordExitStatusTest, TheStatusLineSaysTheTargetWasKilled) {
  const CommandResult recorded = RunCli({"record", BackendOption(GetParam()), "-o", tmp_.Sub("trace.dir"), "--",
                                         PTD_EXIT_AS, "segv"});
  EXPECT_EQ(recorded.exit_code, 128 + SIGSEGV) << recorded.err;
  EXPECT_THAT(recorded.err, HasSubstr("ended by target_killed"));
}

TEST_P(RecordExitStatusTest, AProgramThatCannotRunFailsTheRecordingNamingIt) {
  for (const std::string program : {"/no/such/program", "ptd-no-such-program-in-path"}) {
    const CommandResult recorded = RecordProgram(GetParam(), tmp_.Sub("trace.dir"), {program});
    EXPECT_EQ(recorded.exit_code, kRecordingFailed) << program << ": " << recorded.err;
    EXPECT_THAT(recorded.err, HasSubstr(program));
    EXPECT_FALSE(PathExists(tmp_.Sub("trace.dir"))) << program << ": no empty trace is left";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, RecordExitStatusTest, ::testing::Values(Backend::kValgrind, Backend::kPtrace),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kValgrind ? "Valgrind" : "Ptrace";
                         });

}  // namespace
}  // namespace ptd::testing
