// SIGTERM to `record -- CMD` stops the recording and ends CMD with SIGTERM, as
// `perf record` ends its workload: CMD does not go on running untraced (docs/cli.md,
// "Exit status and signals"), under every emulation backend.
#include <signal.h>

#include <fstream>
#include <string>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/robustness/child_process.h"

namespace ptd::testing {
namespace {

class LaunchedTargetStopTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (std::string why = WhyBackendUnavailable(GetParam()); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_P(LaunchedTargetStopTest, SigtermEndsTheRecordingAndTheLaunchedProgram) {
  TempDir tmp;
  const std::string pidfile = tmp.Sub("target.pid");
  // Loops for minutes unless ended.
  ChildProcess recorder({CliPath(), "record", "-q", BackendOption(GetParam()), "-o", tmp.Sub("trace.dir"), "--",
                         CoreProgram("ptd_core_spin_target"), pidfile});
  ASSERT_TRUE(WaitForFile(pidfile)) << "the target never started";
  int target = 0;
  std::ifstream(pidfile) >> target;
  ASSERT_GT(target, 0);
  ASSERT_TRUE(ProcessRunning(target));
  kill(recorder.pid(), SIGTERM);
  const ChildResult result = recorder.Wait(60);
  EXPECT_FALSE(result.hung);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(PathExists(tmp.Sub("trace.dir/meta.json"))) << "the trace is committed";
  EXPECT_FALSE(ProcessRunning(target)) << "the launched program outlived the recording, untraced";
  if (ProcessRunning(target)) kill(target, SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(Backends, LaunchedTargetStopTest, ::testing::Values(Backend::kValgrind, Backend::kPtrace),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kValgrind ? "Valgrind" : "Ptrace";
                         });

}  // namespace
}  // namespace ptd::testing
