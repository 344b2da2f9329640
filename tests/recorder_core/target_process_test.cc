#include "recorder/target/target_process.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

// `sh -c` leaving `marker` behind when it runs, then exiting with `code`.
LaunchOptions MarkerScript(const std::string& marker, int code) {
  LaunchOptions options;
  options.argv = {"/bin/sh", "-c", "echo x > " + marker + "; exit " + std::to_string(code)};
  return options;
}

// How the target ended ("exited with 3"), or why Wait failed (a test failure).
std::string WaitAndDescribe(TargetProcess& target) {
  absl::StatusOr<int> status = target.Wait();
  EXPECT_TRUE(status.ok()) << status.status();
  return status.ok() ? DescribeWaitStatus(*status) : std::string(status.status().message());
}

TEST(TargetProcessTest, LaunchedChildWaitsForReleaseThenRuns) {
  testing::TempDir tmp;
  std::string marker = tmp.Sub("ran");
  absl::StatusOr<TargetProcess> target = TargetProcess::Launch(MarkerScript(marker, 3));
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_TRUE(target->launched());
  EXPECT_TRUE(target->Alive());
  absl::StatusOr<std::vector<int>> threads = target->Threads();
  ASSERT_TRUE(threads.ok());
  EXPECT_EQ(*threads, std::vector<int>{target->pid()});
  // Held before exec: nothing has run yet.
  absl::StatusOr<std::optional<int>> early = target->TryWait();
  ASSERT_TRUE(early.ok());
  EXPECT_FALSE(early->has_value());
  EXPECT_FALSE(PathExists(marker));
  ASSERT_TRUE(target->Release().ok());
  EXPECT_EQ(WaitAndDescribe(*target), "exited with 3");
  EXPECT_TRUE(PathExists(marker));
}

TEST(TargetProcessTest, MissingCommandFailsBeforeFork) {
  LaunchOptions options;
  options.argv = {"ptd-no-such-command-xyz"};
  absl::StatusOr<TargetProcess> target = TargetProcess::Launch(options);
  ASSERT_FALSE(target.ok());
  EXPECT_NE(target.status().message().find("ptd-no-such-command-xyz"), absl::string_view::npos);
}

TEST(TargetProcessTest, ExecFailureIsReportedByRelease) {
  testing::TempDir tmp;
  std::string bogus = tmp.Sub("not-a-program");
  ASSERT_TRUE(WriteFileAtomic(bogus, std::string_view("\x7f" "ELF garbage")).ok());
  ASSERT_EQ(chmod(bogus.c_str(), 0755), 0);
  for (bool stop_at_exec : {false, true}) {
    LaunchOptions options;
    options.argv = {bogus};
    options.stop_at_exec = stop_at_exec;
    absl::StatusOr<TargetProcess> target = TargetProcess::Launch(options);
    ASSERT_TRUE(target.ok()) << target.status();
    absl::Status st = target->Release();
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("not-a-program"), absl::string_view::npos) << st;
  }
}

TEST(TargetProcessTest, StopAtExecHoldsTheNewImageUntilDetach) {
  testing::TempDir tmp;
  std::string marker = tmp.Sub("ran");
  LaunchOptions options = MarkerScript(marker, 0);
  options.stop_at_exec = true;
  absl::StatusOr<TargetProcess> target = TargetProcess::Launch(options);
  ASSERT_TRUE(target.ok());
  ASSERT_TRUE(target->Release().ok());
  EXPECT_TRUE(target->traced());
  // Stopped after exec: the process image is the new program, which has not run.
  absl::StatusOr<std::string> exe_link = ReadFileToString("/proc/" + std::to_string(target->pid()) + "/comm");
  ASSERT_TRUE(exe_link.ok());
  EXPECT_EQ(*exe_link, "sh\n");
  EXPECT_FALSE(PathExists(marker));
  EXPECT_FALSE(target->Wait().ok());  // the tracer waits, not Wait()
  ASSERT_TRUE(target->Detach().ok());
  EXPECT_EQ(WaitAndDescribe(*target), "exited with 0");
  EXPECT_TRUE(PathExists(marker));
}

TEST(TargetProcessTest, UnreleasedChildIsKilledAndReapedByTheDestructor) {
  int pid = -1;
  {
    LaunchOptions options;
    options.argv = {"/bin/true"};
    absl::StatusOr<TargetProcess> target = TargetProcess::Launch(options);
    ASSERT_TRUE(target.ok());
    pid = target->pid();
  }
  // Reaped: no zombie left behind, so waitpid finds no such child.
  int status;
  EXPECT_EQ(waitpid(pid, &status, WNOHANG), -1);
  EXPECT_FALSE(PathExists("/proc/" + std::to_string(pid)));
}

TEST(TargetProcessTest, AttachChecksThePid) {
  absl::StatusOr<TargetProcess> self = TargetProcess::Attach(getpid());
  ASSERT_TRUE(self.ok());
  EXPECT_FALSE(self->launched());
  EXPECT_TRUE(self->Alive());
  EXPECT_FALSE(self->argv().empty());
  EXPECT_FALSE(self->Release().ok());
  EXPECT_EQ(TargetProcess::Attach(0x3ffffff0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(DescribeWaitStatus(SIGKILL), "killed by SIGKILL");
}

}  // namespace
}  // namespace ptd
