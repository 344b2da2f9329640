// `record --pid` of a process blocked in a system call (cat reading an empty pipe, as a
// server waits for requests): Ctrl-C, SIGTERM and --duration stop the recording within a
// second or so, and the process — also when the recorder is killed with SIGKILL — is
// left running, untraced and intact: it still reads what is then written to it.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/robustness/child_process.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

// What "stops at once" allows on a loaded 2-core machine (the stop itself takes
// milliseconds); a recorder that waits for the blocked call to return never stops.
constexpr double kStopBoundS = 10;
constexpr double kHangGuardS = 30;

double NowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// A field of /proc/PID/status ("TracerPid", "State"), empty when the process is gone.
std::string StatusField(pid_t pid, const std::string& field) {
  absl::StatusOr<std::string> status = ReadFileToString(absl::StrCat("/proc/", pid, "/status"));
  if (!status.ok()) return {};
  for (absl::string_view line : absl::StrSplit(*status, '\n')) {
    if (absl::ConsumePrefix(&line, field + ":")) return std::string(absl::StripAsciiWhitespace(line));
  }
  return {};
}

// /bin/cat reading a pipe nobody writes to yet: blocked in read(2).
class BlockedReader {
 public:
  explicit BlockedReader(const std::string& out_path) : out_path_(out_path) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[0], 0);
      FILE* out = freopen(out_path.c_str(), "w", stdout);
      if (out == nullptr) _exit(126);
      close(fds[0]);
      close(fds[1]);
      execl("/bin/cat", "cat", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[0]);
    write_fd_ = fds[1];
  }
  ~BlockedReader() {
    if (write_fd_ >= 0) close(write_fd_);
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

  // Still there, not traced, not stopped, not a zombie.
  void ExpectRunningUntraced() const {
    EXPECT_EQ(StatusField(pid_, "TracerPid"), "0");
    const std::string state = StatusField(pid_, "State");
    EXPECT_EQ(state.substr(0, 1), "S") << "cat is " << (state.empty() ? "gone" : state);
  }
  // Writes a line and closes the pipe: cat copies it and exits 0, as it would have unrecorded.
  void ExpectStillWorks() {
    const std::string line = "still here\n";
    EXPECT_EQ(write(write_fd_, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    close(write_fd_);
    write_fd_ = -1;
    int status = 0;
    ASSERT_EQ(waitpid(pid_, &status, 0), pid_);
    reaped_ = true;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "cat " << (WIFSIGNALED(status) ? absl::StrCat("was killed by signal ", WTERMSIG(status))
                                          : absl::StrCat("exited with ", WEXITSTATUS(status)));
    absl::StatusOr<std::string> copied = ReadFileToString(out_path_);
    ASSERT_TRUE(copied.ok()) << copied.status();
    EXPECT_EQ(*copied, line);
  }

 private:
  std::string out_path_;
  pid_t pid_ = -1;
  int write_fd_ = -1;
  bool reaped_ = false;
};

class AttachStopTest : public ::testing::Test {
 protected:
  AttachStopTest() : reader_(tmp_.Sub("cat.out")) {}

  // `record --pid` of the reader (and `extra` options), once it traces the reader.
  std::unique_ptr<ChildProcess> AttachRecorder(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {CliPath(), "record", "-q", "--emulate=ptrace", "--pid",
                                     std::to_string(reader_.pid()), "-o", tmp_.Sub("trace.dir")};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto recorder = std::make_unique<ChildProcess>(argv);
    const double start = NowS();
    // The tracer is the recording process `record` supervises (recorder/session/recording_supervisor.h).
    while (!Traced(reader_.pid()) && NowS() - start < kHangGuardS) usleep(10000);
    EXPECT_TRUE(Traced(reader_.pid())) << "never attached";
    return recorder;
  }
  static bool Traced(pid_t pid) {
    const std::string tracer = StatusField(pid, "TracerPid");
    return !tracer.empty() && tracer != "0";
  }

  // Sends `signal` to the recorder; it must end within kStopBoundS with a committed trace.
  void ExpectStopsPromptlyOn(int signal) {
    std::unique_ptr<ChildProcess> recorder = AttachRecorder();
    const double sent = NowS();
    kill(recorder->pid(), signal);
    const ChildResult result = recorder->Wait(kHangGuardS);
    const double took = NowS() - sent;
    EXPECT_FALSE(result.hung) << "the recorder did not stop while cat was blocked in read";
    EXPECT_LT(took, kStopBoundS);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_TRUE(PathExists(tmp_.Sub("trace.dir/meta.json"))) << "the trace is committed";
  }

  TempDir tmp_;
  BlockedReader reader_;
};

TEST_F(AttachStopTest, CtrlCStopsTheRecordingAndTheProcessGoesOn) {
  ExpectStopsPromptlyOn(SIGINT);
  reader_.ExpectRunningUntraced();
  reader_.ExpectStillWorks();
}

TEST_F(AttachStopTest, SigtermStopsTheRecordingAndTheProcessGoesOn) {
  ExpectStopsPromptlyOn(SIGTERM);
  reader_.ExpectRunningUntraced();
  reader_.ExpectStillWorks();
}

TEST_F(AttachStopTest, DurationEndsTheRecordingAndTheProcessGoesOn) {
  const double start = NowS();
  std::unique_ptr<ChildProcess> recorder = AttachRecorder({"--duration", "1"});
  const ChildResult result = recorder->Wait(kHangGuardS);
  EXPECT_FALSE(result.hung) << "--duration did not end the recording while cat was blocked in read";
  EXPECT_LT(NowS() - start, 1 + kStopBoundS);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  reader_.ExpectRunningUntraced();
  reader_.ExpectStillWorks();
}

TEST_F(AttachStopTest, TheProcessSurvivesTheRecorderBeingKilled) {
  std::unique_ptr<ChildProcess> recorder = AttachRecorder();
  usleep(300000);  // recording, cat blocked in read
  kill(recorder->pid(), SIGKILL);
  const ChildResult result = recorder->Wait(kHangGuardS);
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  // The kernel detaches the tracees of a dead tracer as it reaps it.
  const double start = NowS();
  while (StatusField(reader_.pid(), "TracerPid") != "0" && NowS() - start < kHangGuardS) usleep(10000);
  usleep(200000);  // a trap flag left set would kill cat with SIGTRAP by now
  reader_.ExpectRunningUntraced();
  reader_.ExpectStillWorks();
}

// A process caught running its own code (single-stepped: the trap flag set between two
// steps) survives the recorder being killed: the recording, in a process of its own,
// detaches it cleanly and commits the trace. (A tracer killed mid-step leaves the flag
// set and the process dies of SIGTRAP.)
TEST_F(AttachStopTest, ASpinningProcessSurvivesTheRecorderBeingKilledAndTheTraceIsCommitted) {
  ChildProcess spinner({CoreProgram("ptd_core_spin_target"), tmp_.Sub("spin.pid"), "4000000000"});
  ASSERT_TRUE(WaitForFile(tmp_.Sub("spin.pid")));
  ChildProcess recorder({CliPath(), "record", "-q", "--emulate=ptrace", "--pid", std::to_string(spinner.pid()), "-o",
                         tmp_.Sub("spin.dir")});
  const double start = NowS();
  while (!Traced(spinner.pid()) && NowS() - start < kHangGuardS) usleep(10000);
  ASSERT_TRUE(Traced(spinner.pid())) << "never attached";
  usleep(500000);  // stepping the loop
  kill(recorder.pid(), SIGKILL);
  EXPECT_EQ(recorder.Wait(kHangGuardS).exit_code, 128 + SIGKILL);
  const double killed = NowS();
  while (Traced(spinner.pid()) && NowS() - killed < kHangGuardS) usleep(10000);
  usleep(300000);  // a trap flag left set would have killed it by now
  EXPECT_TRUE(ProcessRunning(spinner.pid())) << "the traced process died with the recorder";
  EXPECT_FALSE(Traced(spinner.pid()));
  EXPECT_TRUE(WaitForFile(tmp_.Sub("spin.dir/meta.json"), kHangGuardS)) << "the trace is not committed";
  kill(spinner.pid(), SIGKILL);
  EXPECT_EQ(spinner.Wait(kHangGuardS).exit_code, 128 + SIGKILL) << "it ended some other way before";
}

}  // namespace
}  // namespace ptd::testing
