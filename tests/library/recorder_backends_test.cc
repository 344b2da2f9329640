// ptd::Recorder on the emulation backends and its config checks, as a harness uses it:
// launched programs recorded through the library, snapshot/stop requests reaching the
// recording thread, and every nonsensical config answered with a Status naming the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "ptd/decoder.h"
#include "ptd/recorder.h"
#include "ptd/trace_scope.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;

bool HasIntelPt() { return IsDirectory("/sys/bus/event_source/devices/intel_pt"); }

RecorderConfig PtraceConfig(std::vector<std::string> command) {
  RecorderConfig config;
  config.backend = Backend::kPtrace;
  config.command = std::move(command);
  config.snapshot = false;
  return config;
}

// The pid the spin target writes once it runs.
int WaitForPidFile(const std::string& path) {
  for (int i = 0; i < 3000; ++i) {
    absl::StatusOr<std::string> text = ReadFileToString(path);
    int pid = 0;
    if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid)) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

// WriteTo(dir), then the written meta.json.
absl::StatusOr<TraceMeta> WriteAndReadMeta(Recorder& recorder, const std::string& dir) {
  if (absl::Status written = recorder.WriteTo(dir); !written.ok()) return written;
  return ReadTraceMeta(dir);
}

TEST(RecorderBackendsTest, PtraceRecordsALaunchedCommandAndWaitGivesItsExitCode) {
  ptd::testing::TempDir out;
  Recorder recorder(PtraceConfig({PTD_COUNTED_CALLS}));
  ASSERT_TRUE(recorder.Start().ok());
  EXPECT_EQ(recorder.backend(), Backend::kPtrace);
  absl::StatusOr<int> exit_code = recorder.Wait();
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 3);
  EXPECT_EQ(*recorder.Wait(), 3);  // again: the same answer
  absl::StatusOr<TraceMeta> meta = WriteAndReadMeta(recorder, out.Sub("t"));
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->mode, TraceMode::kEmulated);
  EXPECT_EQ(meta->end_reason, "exit");
  EXPECT_TRUE(meta->archived);
  EXPECT_FALSE(meta->archive.empty());  // the program and its libraries, by build-id
  ASSERT_EQ(meta->streams.size(), 1u);
  EXPECT_FALSE(meta->streams[0].chunks.empty());
  // WriteTo again without force: the directory exists.
  absl::Status again = recorder.WriteTo(out.Sub("t"));
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_TRUE(recorder.WriteTo(out.Sub("t"), /*force=*/true).ok());
}

TEST(RecorderBackendsTest, ArchiveFalseRecordsWithoutCopyingTheBinaries) {
  ptd::testing::TempDir out;
  RecorderConfig config = PtraceConfig({PTD_COUNTED_CALLS});
  config.archive = false;
  Recorder recorder(config);
  ASSERT_TRUE(recorder.Start().ok());
  ASSERT_TRUE(recorder.Wait().ok());
  absl::StatusOr<TraceMeta> meta = WriteAndReadMeta(recorder, out.Sub("t"));
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_FALSE(meta->archived);
  EXPECT_TRUE(meta->archive.empty());
  EXPECT_FALSE(std::filesystem::exists(out.Sub("t") + "/images/by-build-id"));
}

TEST(RecorderBackendsTest, AutoFallsBackFromMissingHardwareAndSaysWhy) {
  if (HasIntelPt()) GTEST_SKIP() << "intel_pt present: kAuto picks the hardware";
  RecorderConfig config = PtraceConfig({PTD_COUNTED_CALLS});
  config.backend = Backend::kAuto;
  Recorder automatic(config);
  ASSERT_TRUE(automatic.Start().ok());
  EXPECT_NE(automatic.backend(), Backend::kHardware);
  EXPECT_THAT(automatic.backend_choice(), HasSubstr("hardware: no intel_pt PMU on this machine"));
  EXPECT_THAT(automatic.backend_choice(),
              HasSubstr(automatic.backend() == Backend::kValgrind ? "Valgrind emulator" : "ptrace emulator"));
  EXPECT_EQ(*automatic.Wait(), 3);
}

TEST(RecorderBackendsTest, PtraceAttachesToSeveralPidsAndLeavesThemRunning) {
  ptd::testing::TempDir out;
  std::vector<pid_t> targets;
  for (const char* name : {"pid1", "pid2"}) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const std::string pid_file = out.Sub(name);
      execl(PTD_SPIN_TARGET, PTD_SPIN_TARGET, pid_file.c_str(), nullptr);
      _exit(127);
    }
    targets.push_back(child);
    ASSERT_EQ(WaitForPidFile(out.Sub(name)), child);
  }
  RecorderConfig config = PtraceConfig({});
  config.pids = {targets[0], targets[1]};
  Recorder recorder(config);
  ASSERT_TRUE(recorder.Start().ok());
  EXPECT_EQ(recorder.target_pid(), targets[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(recorder.Stop().ok());
  absl::StatusOr<TraceMeta> meta = WriteAndReadMeta(recorder, out.Sub("t"));
  for (pid_t target : targets) {
    EXPECT_EQ(kill(target, 0), 0) << target << " did not survive the detach";
    kill(target, SIGKILL);
    waitpid(target, nullptr, 0);
  }
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->pids, (std::vector<int>{targets[0], targets[1]}));
  EXPECT_EQ(meta->streams.size(), 2u);  // one thread each, per-thread streams
}

TEST(RecorderBackendsTest, SnapshotAndStopReachThePtraceRecordingAndStopKillsTheTarget) {
  ptd::testing::TempDir out;
  RecorderConfig config = PtraceConfig({PTD_SPIN_TARGET, out.Sub("pid")});
  config.snapshot = true;
  config.snapshot_size = 64 << 10;
  Recorder recorder(config);
  ASSERT_TRUE(recorder.Start().ok());
  const int pid = WaitForPidFile(out.Sub("pid"));
  ASSERT_GT(pid, 0);

  // One ptrace recording per process at a time: a second one says so.
  Recorder second(PtraceConfig({PTD_COUNTED_CALLS}));
  absl::Status second_started = second.Start();
  EXPECT_EQ(second_started.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second_started.message(), HasSubstr("one at a time"));

  absl::Status snapshot = recorder.Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot;
  absl::Status stopped = recorder.Stop();
  ASSERT_TRUE(stopped.ok()) << stopped;
  EXPECT_EQ(kill(pid, 0), -1);  // killed with the recording (it was launched)
  EXPECT_EQ(recorder.Snapshot().code(), absl::StatusCode::kFailedPrecondition);
  // The command did not exit by itself: Wait has no exit code to give.
  EXPECT_THAT(recorder.Wait().status().message(), HasSubstr("the recording ended (control) before the command exited"));

  absl::StatusOr<TraceMeta> meta = WriteAndReadMeta(recorder, out.Sub("t"));
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->end_reason, "control");
  ASSERT_EQ(meta->streams.size(), 1u);
  // The snapshot's chunk, and one at the stop unless the target made no step in between
  // (both are tagged "control"). That Snapshot() returned OK already says the recording
  // thread served it: the answer comes after the chunk is written.
  ASSERT_FALSE(meta->streams[0].chunks.empty());
  EXPECT_LE(meta->streams[0].chunks.size(), 2u);
  EXPECT_EQ(meta->streams[0].chunks[0].reason, "control");
}

TEST(RecorderBackendsTest, ValgrindRecordsALaunchedCommandLikePtrace) {
  RecorderConfig config = PtraceConfig({PTD_COUNTED_CALLS});
  config.backend = Backend::kValgrind;
  Recorder recorder(config);
  absl::Status started = recorder.Start();
  if (absl::IsFailedPrecondition(started)) GTEST_SKIP() << started.message();
  ASSERT_TRUE(started.ok()) << started;
  absl::StatusOr<int> exit_code = recorder.Wait();
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 3);
  ptd::testing::TempDir out;
  absl::StatusOr<TraceMeta> meta = WriteAndReadMeta(recorder, out.Sub("t"));
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->mode, TraceMode::kEmulated);
  EXPECT_EQ(meta->emulator, "valgrind");
  absl::StatusOr<TraceSummary> summary = DecodeSummary(out.Sub("t"));
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->totals.errors, 0u);
  EXPECT_EQ(summary->functions.at("row").calls, 10u);
  EXPECT_EQ(summary->functions.at("cell").calls, 40u);
}

TEST(RecorderBackendsTest, DestroyingARecorderKillsItsTarget) {
  ptd::testing::TempDir out;
  int pid = -1;
  {
    Recorder recorder(PtraceConfig({PTD_SPIN_TARGET, out.Sub("pid")}));
    ASSERT_TRUE(recorder.Start().ok());
    pid = WaitForPidFile(out.Sub("pid"));
    ASSERT_GT(pid, 0);
  }
  EXPECT_EQ(kill(pid, 0), -1);
}

TEST(RecorderBackendsTest, ATargetThatCannotRunIsAnErrorFromWaitNotAnAbort) {
  ptd::testing::TempDir out;
  ASSERT_TRUE(WriteFileAtomic(out.Sub("not-a-program"), std::string_view("garbage\n")).ok());
  ASSERT_EQ(chmod(out.Sub("not-a-program").c_str(), 0755), 0);
  Recorder recorder(PtraceConfig({out.Sub("not-a-program")}));
  ASSERT_TRUE(recorder.Start().ok());
  absl::StatusOr<int> exit_code = recorder.Wait();
  EXPECT_FALSE(exit_code.ok());
  EXPECT_THAT(exit_code.status().message(), HasSubstr("not-a-program"));
  EXPECT_FALSE(recorder.WriteTo(out.Sub("t")).ok());
  EXPECT_FALSE(PathExists(out.Sub("t")));
}

// Start() on `config`: the error, which must name `field`.
void ExpectStartError(RecorderConfig config, absl::StatusCode code, const std::string& text) {
  Recorder recorder(std::move(config));
  absl::Status st = recorder.Start();
  EXPECT_EQ(st.code(), code) << st;
  EXPECT_THAT(st.message(), HasSubstr(text));
  EXPECT_EQ(recorder.Snapshot().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(recorder.Wait().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RecorderConfigTest, PidAndCommandBothSet) {
  RecorderConfig config = PtraceConfig({PTD_COUNTED_CALLS});
  config.pids = {getpid()};
  ExpectStartError(config, absl::StatusCode::kInvalidArgument,
                   "RecorderConfig.pids and RecorderConfig.command are both set");
}

TEST(RecorderConfigTest, NotAProcessId) {
  RecorderConfig config = PtraceConfig({});
  config.pids = {getpid(), -5};
  ExpectStartError(config, absl::StatusCode::kInvalidArgument, "RecorderConfig.pids[1] = -5: not a process id");
  config.pids = {getpid(), getpid()};
  ExpectStartError(config, absl::StatusCode::kInvalidArgument, "RecorderConfig.pids[1] = ");
  config.pids = {0x3fffffff};  // above pid_max
  ExpectStartError(config, absl::StatusCode::kNotFound, "RecorderConfig.pids[0] = 1073741823: no such process");
}

TEST(RecorderConfigTest, SizesNotAPowerOfTwoNumberOfPages) {
  RecorderConfig config = PtraceConfig({PTD_COUNTED_CALLS});
  config.snapshot_size = 12345;
  ExpectStartError(config, absl::StatusCode::kInvalidArgument,
                   "RecorderConfig.snapshot_size = 12345: not a power-of-two number of");
  config = PtraceConfig({PTD_COUNTED_CALLS});
  config.buffer_size = 3 << 20;
  ExpectStartError(config, absl::StatusCode::kInvalidArgument, "RecorderConfig.buffer_size = 3145728");
  config.buffer_size = 0;
  ExpectStartError(config, absl::StatusCode::kInvalidArgument, "RecorderConfig.buffer_size = 0");
}

TEST(RecorderConfigTest, MissingCommand) {
  ExpectStartError(PtraceConfig({"ptd-no-such-command"}), absl::StatusCode::kNotFound,
                   "RecorderConfig.command[0]: ptd-no-such-command: command not found in PATH");
  ExpectStartError(PtraceConfig({"/nonexistent/prog"}), absl::StatusCode::kNotFound,
                   "RecorderConfig.command[0]: ");
  ExpectStartError(PtraceConfig({""}), absl::StatusCode::kInvalidArgument, "RecorderConfig.command[0]: ");
  // Neither command nor pid: tracing oneself, which emulation cannot do.
  ExpectStartError(PtraceConfig({}), absl::StatusCode::kFailedPrecondition,
                   "RecorderConfig.backend = ptrace cannot trace the calling thread");
}

TEST(RecorderConfigTest, BadTiming) {
  RecorderConfig config = PtraceConfig({PTD_COUNTED_CALLS});
  config.timing = "fast";
  ExpectStartError(config, absl::StatusCode::kInvalidArgument, "RecorderConfig.timing \"fast\"");
}

TEST(RecorderConfigTest, HardwareOnlyOptionsOnAnEmulationBackend) {
  RecorderConfig config = PtraceConfig({PTD_COUNTED_CALLS});
  config.kernel = true;
  ExpectStartError(config, absl::StatusCode::kInvalidArgument, "RecorderConfig.kernel: the ptrace backend");
  config = PtraceConfig({PTD_COUNTED_CALLS});
  config.pt_config = "cyc=1";
  ExpectStartError(config, absl::StatusCode::kInvalidArgument, "RecorderConfig.pt_config");
  config = PtraceConfig({PTD_COUNTED_CALLS});
  config.filter = "filter main";
  ExpectStartError(config, absl::StatusCode::kInvalidArgument, "RecorderConfig.filter");
}

TEST(RecorderConfigTest, UnavailableBackends) {
  if (!HasIntelPt()) {
    RecorderConfig config = PtraceConfig({PTD_COUNTED_CALLS});
    config.backend = Backend::kHardware;
    ExpectStartError(config, absl::StatusCode::kFailedPrecondition,
                     "RecorderConfig.backend = hardware: no intel_pt PMU on this machine");
  }
  // Valgrind missing: no valgrind on PATH.
  RecorderConfig config = PtraceConfig({PTD_COUNTED_CALLS});
  config.backend = Backend::kValgrind;
  const std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  setenv("PATH", "/nonexistent", 1);
  ExpectStartError(config, absl::StatusCode::kFailedPrecondition, "RecorderConfig.backend = valgrind: ");
  setenv("PATH", path.c_str(), 1);
  // Valgrind cannot attach.
  config.command.clear();
  config.pids = {getpid()};
  ExpectStartError(config, absl::StatusCode::kInvalidArgument, "RecorderConfig.backend = valgrind: ");
}

TEST(RecorderConfigTest, TraceScopeIsHardwareOnlyAndSaysSo) {
  RecorderConfig config;
  config.backend = Backend::kPtrace;
  ptd::testing::TempDir out;
  {
    TraceScope scope(out.Sub("x.trace"), config);
    EXPECT_EQ(scope.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(scope.status().message(), HasSubstr("only Intel PT hardware can"));
  }
  EXPECT_FALSE(PathExists(out.Sub("x.trace")));
  if (!HasIntelPt()) {
    TraceScope automatic(out.Sub("y.trace"));
    EXPECT_THAT(automatic.status().message(), HasSubstr("tracing the calling thread needs Intel PT"));
  }
}

TEST(RecorderConfigTest, StartTwiceAndCallsBeforeStart) {
  Recorder recorder(PtraceConfig({PTD_COUNTED_CALLS}));
  EXPECT_EQ(recorder.Stop().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(recorder.WriteTo("/nonexistent/x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(recorder.Wait().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(recorder.Start().ok());
  EXPECT_EQ(recorder.Start().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*recorder.Wait(), 3);
}

}  // namespace
}  // namespace ptd
