// The record loop with a recording SnapshotTaker: real signals, a real control FIFO, a
// real child process, and real hardware breakpoints (the breakpoint PMU works on VMs).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "recorder/pt/breakpoint_trigger.h"
#include "recorder/session/control_fifo.h"
#include "recorder/pt/record_session.h"
#include "recorder/pt/status_line.h"
#include "recorder/sideband/sideband_recorder.h"
#include "recorder/target/target_process.h"
#include "tests/testing/test_util.h"

// Defined at the end: a function with external linkage in this binary's symbol table.
extern "C" void ptd_session_test_probe();

namespace ptd::pt {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RecordingTaker : public SnapshotTaker {
 public:
  absl::Status Snapshot(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    reasons_.push_back(reason);
    return absl::OkStatus();
  }
  absl::Status Drain() override {
    std::lock_guard<std::mutex> lock(mu_);
    drains_++;
    return absl::OkStatus();
  }
  std::vector<int> WakeupFds() const override { return wakeup_fds_; }
  std::vector<int> wakeup_fds_;
  RecordCounters counters() const override { return {}; }
  std::vector<std::string> reasons() {
    std::lock_guard<std::mutex> lock(mu_);
    return reasons_;
  }
  int drains() {
    std::lock_guard<std::mutex> lock(mu_);
    return drains_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> reasons_;
  int drains_ = 0;
};

SessionOptions Quiet() {
  SessionOptions o;
  o.handle_signals = false;
  o.quiet = true;
  o.drain_interval_ms = 20;
  return o;
}

std::string TriggerTargetPath() { return std::string(PTD_BINARY_DIR) + "/tests/recorder_pt/ptd-trigger-target"; }

// A ring opened while the loop runs (a new thread's in per-thread mode, a followed
// child's) must wake the loop at its watermark like the first ones, not wait for the
// periodic drain.
class GrowingTaker : public RecordingTaker {
 public:
  ~GrowingTaker() override {
    for (int fd : late_) close(fd);
  }
  absl::Status Drain() override {
    absl::Status st = RecordingTaker::Drain();
    if (late_[0] < 0) {
      // The first drain opens a ring whose data is already past its watermark.
      if (pipe2(late_, O_CLOEXEC | O_NONBLOCK) != 0) return absl::InternalError("pipe");
      (void)!write(late_[1], "x", 1);
      wakeup_fds_.push_back(late_[0]);
    } else {
      char byte;
      while (read(late_[0], &byte, 1) == 1) late_drained_ = true;
    }
    return st;
  }
  bool late_drained() const { return late_drained_; }

 private:
  int late_[2] = {-1, -1};
  bool late_drained_ = false;
};

TEST(RecordSessionTest, RingsOpenedWhileRunningWakeTheLoop) {
  GrowingTaker taker;
  SessionOptions o = Quiet();
  o.drain_interval_ms = 1000000;  // only wake-ups drain after the first round
  o.duration_s = 2;
  RecordSession session(o, &taker);
  auto reason = session.Run();
  ASSERT_TRUE(reason.ok()) << reason.status();
  EXPECT_TRUE(taker.late_drained()) << taker.drains() << " drains, none woken by the new ring";
}

TEST(RecordSessionTest, DurationStopsByItselfWithAFinalSnapshot) {
  RecordingTaker taker;
  SessionOptions o = Quiet();
  o.duration_s = 0.2;
  RecordSession session(o, &taker);
  auto reason = session.Run();
  ASSERT_TRUE(reason.ok()) << reason.status();
  EXPECT_EQ(*reason, "duration");
  EXPECT_THAT(taker.reasons(), ElementsAre("duration"));
  EXPECT_GT(taker.drains(), 0);  // periodic drains while waiting
}

TEST(RecordSessionTest, HungUpRingIsDrainedOnceAndNoLongerPolled) {
  // A per-thread event whose task exited polls POLLHUP for ever (the fake kernel's fd
  // does the same: a pipe whose writer is closed). Polling it again would drain in a
  // tight loop; with the timer alone, 0.3 s at 10 s per timed drain is a handful.
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  close(fds[1]);
  RecordingTaker taker;
  taker.wakeup_fds_ = {fds[0]};
  SessionOptions o = Quiet();
  o.drain_interval_ms = 10000;
  o.duration_s = 0.3;
  RecordSession session(o, &taker);
  auto reason = session.Run();
  close(fds[0]);
  ASSERT_TRUE(reason.ok()) << reason.status();
  EXPECT_GE(taker.drains(), 1);
  EXPECT_LE(taker.drains(), 3);
}

TEST(RecordSessionTest, TargetExitTakesTheFinalSnapshotAfterTheExit) {
  LaunchOptions launch;
  launch.argv = {"/bin/sleep", "0.2"};
  auto target = TargetProcess::Launch(launch);
  ASSERT_TRUE(target.ok()) << target.status();
  ASSERT_TRUE(target->Release().ok());
  RecordingTaker taker;
  RecordSession session(Quiet(), &taker);
  ASSERT_TRUE(session.WatchTargets({target->pid()}).ok());
  auto reason = session.Run();
  ASSERT_TRUE(reason.ok()) << reason.status();
  EXPECT_EQ(*reason, "exit");
  EXPECT_THAT(taker.reasons(), ElementsAre("exit"));
  // It really had exited when the snapshot was taken: reaping does not block.
  auto status = target->TryWait();
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(status->has_value());
}

TEST(RecordSessionTest, SeveralTargetsEndTheRecordingWhenTheLastExits) {
  // record --pid A,B: the first exit is not the end; the last one is.
  std::vector<TargetProcess> targets;
  std::vector<int> pids;
  for (const char* seconds : {"0.05", "0.4"}) {
    LaunchOptions launch;
    launch.argv = {"/bin/sleep", seconds};
    auto target = TargetProcess::Launch(launch);
    ASSERT_TRUE(target.ok()) << target.status();
    ASSERT_TRUE(target->Release().ok());
    pids.push_back(target->pid());
    targets.push_back(*std::move(target));
  }
  RecordingTaker taker;
  RecordSession session(Quiet(), &taker);
  ASSERT_TRUE(session.WatchTargets(pids).ok());
  auto reason = session.Run();
  ASSERT_TRUE(reason.ok()) << reason.status();
  EXPECT_EQ(*reason, "exit");
  EXPECT_THAT(taker.reasons(), ElementsAre("exit"));
  for (TargetProcess& target : targets) {
    auto status = target.TryWait();
    ASSERT_TRUE(status.ok());
    EXPECT_TRUE(status->has_value()) << "process " << target.pid() << " still running at the end";
  }
}

TEST(RecordSessionTest, SigusrTwoSnapshotsAndSigintStops) {
  RecordingTaker taker;
  SessionOptions o = Quiet();
  o.handle_signals = true;
  RecordSession session(o, &taker);
  ASSERT_TRUE(session.Prepare().ok());  // blocks the signals in this thread from here on
  // Created after Prepare(): inherits the blocked mask, so the process-directed signals
  // stay pending for the session's signalfd instead of killing a thread.
  std::thread sender([&] {
    kill(getpid(), SIGUSR2);
    while (taker.reasons().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    kill(getpid(), SIGINT);
  });
  auto reason = session.Run();
  sender.join();
  ASSERT_TRUE(reason.ok()) << reason.status();
  EXPECT_EQ(*reason, "sigint");
  EXPECT_THAT(taker.reasons(), ElementsAre("sigusr2", "sigint"));
}

TEST(RecordSessionTest, SigtermStopsToo) {
  RecordingTaker taker;
  SessionOptions o = Quiet();
  o.handle_signals = true;
  RecordSession session(o, &taker);
  ASSERT_TRUE(session.Prepare().ok());
  std::thread sender([] { kill(getpid(), SIGTERM); });
  auto reason = session.Run();
  sender.join();
  ASSERT_TRUE(reason.ok());
  EXPECT_EQ(*reason, "sigterm");
  EXPECT_THAT(taker.reasons(), ElementsAre("sigterm"));
}

TEST(RecordSessionTest, ControlFifoSnapshotAndStopAreAcknowledgedAfterTheWork) {
  ptd::testing::TempDir dir;
  const std::string fifo = dir.Sub("ctl");
  RecordingTaker taker;
  SessionOptions o = Quiet();
  o.control_fifo = fifo;
  RecordSession session(o, &taker);
  ASSERT_TRUE(session.Prepare().ok());  // creates ctl and ctl.ack
  absl::StatusOr<std::string> reason;
  std::thread loop([&] { reason = session.Run(); });
  EXPECT_EQ(ptd::testing::ControlFifoCommand(fifo, "snapshot"), "ack");
  EXPECT_THAT(taker.reasons(), ElementsAre("control"));  // done before the ack
  EXPECT_THAT(ptd::testing::ControlFifoCommand(fifo, "frobnicate"), HasSubstr("unknown command"));
  EXPECT_EQ(ptd::testing::ControlFifoCommand(fifo, "snapshot"), "ack");
  EXPECT_EQ(ptd::testing::ControlFifoCommand(fifo, "stop"), "ack");
  loop.join();
  ASSERT_TRUE(reason.ok()) << reason.status();
  EXPECT_EQ(*reason, "control");
  EXPECT_THAT(taker.reasons(), ElementsAre("control", "control", "control"));
  EXPECT_THAT(session.notes(), ElementsAre(HasSubstr("frobnicate")));
}

TEST(ControlFifoTest, RefusesAPathThatIsNotAFifo) {
  ptd::testing::TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir.Sub("file"), std::string_view("x")).ok());
  auto fifo = ControlFifo::Open(dir.Sub("file"));
  ASSERT_FALSE(fifo.ok());
  EXPECT_THAT(std::string(fifo.status().message()), HasSubstr("not a FIFO"));
}

TEST(ControlFifoTest, ParsesLinesIgnoringWhitespace) {
  EXPECT_EQ(ParseControlLine("  snapshot\r").command, ControlCommand::kSnapshot);
  EXPECT_EQ(ParseControlLine("stop").command, ControlCommand::kStop);
  EXPECT_EQ(ParseControlLine("Stop").command, ControlCommand::kUnknown);
}

TEST(StatusLineTest, SaysTimeBytesSnapshotsAndLost) {
  RecordCounters c;
  c.bytes = 3 << 20;
  c.snapshots = 2;
  c.lost = 1;
  std::string line = FormatStatusLine(12.5, c);
  EXPECT_THAT(line, HasSubstr("12.5s"));
  EXPECT_THAT(line, HasSubstr("3.00 MiB"));
  EXPECT_THAT(line, HasSubstr("2 snapshots"));
  EXPECT_THAT(line, HasSubstr("1 lost"));
  // Quiet when not a terminal: a pipe is not one.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  FILE* out = fdopen(fds[1], "w");
  StatusLine status(out, /*quiet=*/false);
  EXPECT_FALSE(status.enabled());
  fclose(out);
  close(fds[0]);
}

// What a session with the real breakpoints on ptd-trigger-target did.
struct TriggerRun {
  std::string end_reason;
  std::vector<std::string> snapshot_reasons;  // the taker's, in order
  std::vector<std::string> notes;
};

// Launches the trigger test program (3 calls of ptd_trigger_point), resolves its symbol
// and runs a session with the real breakpoints.
absl::StatusOr<TriggerRun> RunTriggerSession(bool multi, uint64_t after) {
  LaunchOptions launch;
  launch.argv = {TriggerTargetPath(), "3", "300"};
  auto target = TargetProcess::Launch(launch);
  if (!target.ok()) return target.status();
  if (auto st = target->Release(); !st.ok()) return st;
  auto address = ResolveSymbolInProcess(target->pid(), "ptd_trigger_point");
  if (!address.ok()) return address.status();
  auto tids = target->Threads();
  if (!tids.ok()) return tids.status();
  auto cpus = OnlineCpus();
  if (!cpus.ok()) return cpus.status();
  auto trigger = BreakpointTrigger::Create(*address, *tids, *cpus, /*watch_returns=*/false);
  if (!trigger.ok()) return trigger.status();
  SessionOptions o = Quiet();
  o.multi_snapshot = multi;
  o.trigger.symbol = "ptd_trigger_point";
  o.trigger.after = after;
  o.trigger.repeat = multi;
  RecordingTaker taker;
  RecordSession session(o, &taker);
  if (auto st = session.WatchTargets({target->pid()}); !st.ok()) return st;
  session.SetTrigger(*std::move(trigger));
  auto reason = session.Run();
  (void)target->Wait();
  if (!reason.ok()) return reason.status();
  return TriggerRun{*reason, taker.reasons(), session.notes()};
}

struct TriggerCase {
  std::string name;
  bool multi = false;
  uint64_t after = 1;  // --trigger-after
  std::string end_reason;
  std::vector<std::string> snapshot_reasons;
  std::vector<std::string> note_parts;  // one note must hold all of these
};

class TriggerTest : public ::testing::TestWithParam<TriggerCase> {};

TEST_P(TriggerTest, SessionEndsAndSnapshotsAsThePolicySays) {
  const TriggerCase& c = GetParam();
  absl::StatusOr<TriggerRun> run = RunTriggerSession(c.multi, c.after);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->end_reason, c.end_reason);
  EXPECT_EQ(run->snapshot_reasons, c.snapshot_reasons);
  if (!c.note_parts.empty()) {
    std::vector<::testing::Matcher<std::string>> parts;
    for (const std::string& part : c.note_parts) parts.push_back(HasSubstr(part));
    EXPECT_THAT(run->notes, Contains(::testing::AllOfArray(parts)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    RecordSession, TriggerTest,
    ::testing::Values(
        TriggerCase{"HardwareBreakpointOnASymbolTakesOneSnapshotAndStops", false, 1, "trigger", {"trigger"}, {}},
        TriggerCase{"MultiSnapshotRearmsAndKeepsGoingUntilExit", true, 1, "exit",
                    {"trigger", "trigger", "trigger", "exit"}, {}},
        // The policy's account: two entries seen, fired on the second.
        TriggerCase{"TriggerAfterFiresOnTheNthBreakpointHit", false, 2, "trigger", {"trigger"},
                    {"2 entries", "first on hit 2"}},
        TriggerCase{"TriggerAfterMoreHitsThanTheProgramMakesNeverFires", false, 4, "exit", {"exit"}, {}}),
    [](const ::testing::TestParamInfo<TriggerCase>& info) { return info.param.name; });

TEST(TriggerSymbolTest, ResolvedAddressIsWhereTheFunctionRuns) {
  // Independent check: this test binary resolves a function of its own and compares
  // with the function pointer the compiler gives.
  auto address = ResolveSymbolInProcess(getpid(), "ptd_session_test_probe");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(*address, reinterpret_cast<uint64_t>(&::ptd_session_test_probe));
}

TEST(TriggerSymbolTest, UnknownSymbolNamesIt) {
  auto address = ResolveSymbolInProcess(getpid(), "no_such_function_anywhere_xyz");
  ASSERT_FALSE(address.ok());
  EXPECT_THAT(std::string(address.status().message()), HasSubstr("no_such_function_anywhere_xyz"));
}

}  // namespace
}  // namespace ptd::pt

extern "C" __attribute__((noinline)) void ptd_session_test_probe() { __asm__ volatile("" ::: "memory"); }
