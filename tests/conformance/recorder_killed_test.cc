// `record -- CMD` stopped with Ctrl-C, or killed with SIGKILL, under every emulation
// backend (docs/cli.md, "Exit status and signals"): Ctrl-C commits the trace and ends
// CMD, and nothing but the trace is left; SIGKILL kills CMD with the recorder, and what
// CMD started stops writing trace data nobody will read (under Valgrind it would fill the
// disk at hundreds of MB/s); the next recording to the same directory removes what the
// killed one left beside it.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/robustness/child_process.h"

namespace ptd::testing {
namespace {

// A bound for what takes milliseconds, generous for a loaded 2-core machine.
constexpr double kBoundS = 10;

int ReadPid(const std::string& pidfile) {
  int pid = 0;
  std::ifstream(pidfile) >> pid;
  return pid;
}

// Polls `done` every 50 ms for up to `limit_s`.
template <typename Done>
bool WaitUntil(Done done, double limit_s = kBoundS) {
  for (int i = 0; i < static_cast<int>(limit_s * 20); ++i) {
    if (done()) return true;
    usleep(50000);
  }
  return done();
}

// Bytes of the files under `dir` (the trace data on disk).
uint64_t BytesUnder(const std::string& dir) {
  const CommandResult du = RunCommand({"/usr/bin/du", "-sb", dir});
  return du.exit_code == 0 ? std::stoull(du.out) : 0;
}

// Whether process `pid` has a Valgrind tool stream (*.vgpt) open.
bool HoldsTraceStream(int pid) {
  const CommandResult fds = RunCommand({"/usr/bin/find", absl::StrCat("/proc/", pid, "/fd"), "-lname", "*.vgpt"});
  return !fds.out.empty();
}

class RecorderKilledTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (std::string why = WhyBackendUnavailable(GetParam()); !why.empty()) GTEST_SKIP() << why;
  }
  // `record -q -o trace.dir -- sh -c 'SPIN child.pid & exec SPIN target.pid'` started in
  // the temp directory: the launched program execs a spinning target that has a spinning
  // child of its own.
  std::vector<std::string> RecordSpinners() const {
    const std::string spin = CoreProgram("ptd_core_spin_target");
    return {CliPath(), "record", "-q", BackendOption(GetParam()), "-o", tmp_.Sub("trace.dir"), "--", "/bin/sh", "-c",
            absl::StrCat("'", spin, "' '", tmp_.Sub("child.pid"), "' & exec '", spin, "' '", tmp_.Sub("target.pid"),
                         "'")};
  }
  void KillIfRunning(int pid) {
    if (pid > 0 && ProcessRunning(pid)) kill(pid, SIGKILL);
  }
  TempDir tmp_;
};

TEST_P(RecorderKilledTest, CtrlCCommitsTheTraceEndsTheProgramAndLeavesNothingElse) {
  ChildProcess recorder(RecordSpinners());
  ASSERT_TRUE(WaitForFile(tmp_.Sub("target.pid")) && WaitForFile(tmp_.Sub("child.pid"))) << "never started";
  const int target = ReadPid(tmp_.Sub("target.pid"));
  const int child = ReadPid(tmp_.Sub("child.pid"));
  ASSERT_TRUE(ProcessRunning(target));
  kill(recorder.pid(), SIGINT);
  const ChildResult result = recorder.Wait(60);
  EXPECT_FALSE(result.hung);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_TRUE(PathExists(tmp_.Sub("trace.dir/meta.json"))) << "the trace is committed";
  EXPECT_TRUE(WaitUntil([&] { return !ProcessRunning(target); })) << "the launched program went on untraced";
  KillIfRunning(target);
  KillIfRunning(child);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessRunning(child); }));
  const CommandResult listing = RunCommand({"/bin/ls", "-A", tmp_.path()});
  EXPECT_EQ(listing.out, "child.pid\ntarget.pid\ntrace.dir\n");
}

TEST_P(RecorderKilledTest, SigkillEndsTheProgramAndNothingGoesOnWritingTraceData) {
  ChildProcess recorder(RecordSpinners());
  ASSERT_TRUE(WaitForFile(tmp_.Sub("target.pid")) && WaitForFile(tmp_.Sub("child.pid"))) << "never started";
  const int target = ReadPid(tmp_.Sub("target.pid"));
  const int child = ReadPid(tmp_.Sub("child.pid"));
  ASSERT_TRUE(ProcessRunning(target) && ProcessRunning(child));
  sleep(1);  // tracing in full flow
  kill(recorder.pid(), SIGKILL);
  const ChildResult result = recorder.Wait(60);
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessRunning(target); })) << "the launched program outlived the recorder";
  // The child may go on (untraced); if it does, it no longer writes trace data: whatever
  // lies beside the trace directory stops growing.
  const std::string partial = absl::StrCat(tmp_.Sub("trace.dir"), ".partial-", recorder.pid());
  const std::string work = absl::StrCat(tmp_.Sub("trace.dir"), ".valgrind-", recorder.pid());
  EXPECT_TRUE(IsDirectory(partial)) << "what was recorded stays on disk";
  uint64_t before = 0;
  EXPECT_TRUE(WaitUntil([&] {
    const uint64_t now = BytesUnder(tmp_.path());
    const bool still = now == before;
    before = now;
    if (!still) usleep(500000);
    return still;
  })) << "trace data still grows after the recorder was killed: " << before << " bytes";
  EXPECT_TRUE(WaitUntil([&] { return !HoldsTraceStream(child); })) << "the child still writes its trace stream";
  KillIfRunning(child);
  // The next recording to the same directory removes the killed recorder's working
  // directory (the partial trace stays: it is data).
  const CommandResult next = RunCommand({CliPath(), "record", "-q", BackendOption(GetParam()), "-o",
                                         tmp_.Sub("trace.dir"), "--", CoreProgram("ptd_core_spin_target"),
                                         tmp_.Sub("next.pid"), "10"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_FALSE(PathExists(work));
  EXPECT_TRUE(IsDirectory(partial));
}

INSTANTIATE_TEST_SUITE_P(Backends, RecorderKilledTest, ::testing::Values(Backend::kValgrind, Backend::kPtrace),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kValgrind ? "Valgrind" : "Ptrace";
                         });

}  // namespace
}  // namespace ptd::testing
