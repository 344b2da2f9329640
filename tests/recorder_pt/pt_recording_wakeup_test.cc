// The recording loop's wake-ups: rings that wake it when there is data, and none that
// makes it spin.
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include <chrono>
#include <thread>
#include <condition_variable>
#include <mutex>

#include "recorder/pt/record_session.h"
#include "tests/recorder_pt/pt_recording_fixture.h"

namespace ptd::pt {
namespace {

using testing::FakePtKernel;

// Counts the drains of the recording it forwards to.
class CountingTaker : public SnapshotTaker {
 public:
  explicit CountingTaker(SnapshotTaker* inner) : inner_(inner) {}
  absl::Status Snapshot(const std::string& reason) override { return inner_->Snapshot(reason); }
  absl::Status Drain() override {
    drains_++;
    return inner_->Drain();
  }
  std::vector<int> WakeupFds() const override { return inner_->WakeupFds(); }
  RecordCounters counters() const override { return inner_->counters(); }
  int drains() const { return drains_; }

 private:
  SnapshotTaker* inner_;
  int drains_ = 0;
};

TEST_F(PtRecordingTest, ARingWhoseThreadExitedDoesNotSpinTheLoop) {
  options_.record.per_thread = true;
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  factory_.kernel(0).ExitTask();  // the fd polls POLLHUP from now on
  CountingTaker taker(rec->get());
  SessionOptions session_options;
  session_options.handle_signals = false;
  session_options.quiet = true;
  session_options.drain_interval_ms = 10000;
  session_options.duration_s = 0.3;
  RecordSession session(session_options, &taker);
  auto reason = session.Run();
  ASSERT_TRUE(reason.ok()) << reason.status();
  EXPECT_LE(taker.drains(), 3);
}

// Runs `session` on a thread while the test acts as the kernel's producer.
class SessionThread {
 public:
  SessionThread(SnapshotTaker* taker, double duration_s) {
    SessionOptions options;
    options.handle_signals = false;
    options.quiet = true;
    options.drain_interval_ms = 60000;  // only wake-ups drain within the test
    options.duration_s = duration_s;
    session_ = std::make_unique<RecordSession>(options, taker);
    thread_ = std::thread([this] { reason_ = session_->Run(); });
  }
  absl::StatusOr<std::string> Join() {
    thread_.join();
    return reason_;
  }

 private:
  std::unique_ptr<RecordSession> session_;
  std::thread thread_;
  absl::StatusOr<std::string> reason_ = absl::UnknownError("not run");
};

// Whether the reader takes everything `kernel` published within `limit` (the loop has
// only wake-ups to go by: its timer is a minute away). The fake then clears its wakeup.
bool ReaderCatchesUp(FakePtKernel& kernel, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    const uint64_t head = __atomic_load_n(&kernel.header()->aux_head, __ATOMIC_ACQUIRE);
    if (head != 0 && __atomic_load_n(&kernel.header()->aux_tail, __ATOMIC_ACQUIRE) == head) {
      kernel.WriteTrace({});  // the producer's next step
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A thread that only waits, so this process has a second live thread to attach to.
class IdleThread {
 public:
  IdleThread() : thread_([this] {
    tid_ = static_cast<int>(syscall(SYS_gettid));
    std::unique_lock<std::mutex> lock(mu_);
    cv_.notify_all();
    cv_.wait(lock, [this] { return done_; });
  }) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return tid_ != 0; });
  }
  ~IdleThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  int tid() const { return tid_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  int tid_ = 0;
  std::thread thread_;
};

// `options` also trace thread `other` of this process, on linear per-CPU rings (several
// threads' events on one ring).
void TraceWithLinearPerCpuRings(PtRecordingOptions* options, int other) {
  options->self_tids.push_back(other);
  options->record.snapshot = false;
  options->record.per_thread = false;
}

// Attached threads' events are opened disabled (nothing of theirs precedes the mappings
// synthesized from /proc) and run once enabled; a truncation stops only the event that
// was writing, and the recorder's read enables it again.
TEST_F(PtRecordingTest, AttachedEventsRunOnlyOnceEnabledAndATruncationStopsOnlyItsEvent) {
  IdleThread other;
  const int self = options_.self_tids.front();
  TraceWithLinearPerCpuRings(&options_, other.tid());
  size_t written_before_enable = 1;
  factory_.on_open = [&](FakePtKernel& k) {
    if (k.options().cpu == 0) written_before_enable = k.WriteTrace(testing::TraceBytes(100, 1));
  };
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(written_before_enable, 0u) << "opened disabled (attr.disabled)";
  FakePtKernel& k = factory_.kernel(0);
  EXPECT_EQ(factory_.requests().at(0).attr.disabled, 1u);
  EXPECT_TRUE(k.pt_enabled(self));
  EXPECT_TRUE(k.pt_enabled(other.tid()));
  k.RunTask(other.tid());
  k.WriteTrace(testing::TraceBytes(5 * 4096, 2));  // more than the 4-page ring holds
  EXPECT_FALSE(k.pt_enabled(other.tid())) << "the writing event is disabled (pending_disable)";
  EXPECT_TRUE(k.pt_enabled(self)) << "the ring's other events are not";
  ASSERT_TRUE((*rec)->Drain().ok());
  EXPECT_TRUE(k.pt_enabled(other.tid())) << "enabled again after the read";
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
}

// A per-CPU ring holds the events of several threads; the one polled first may hang up
// (its thread exited) while the others still write: their fds wake the loop.
TEST_F(PtRecordingTest, APerCpuRingWakesTheLoopAfterItsFirstThreadExited) {
  IdleThread other;
  const int self = options_.self_tids.front();
  TraceWithLinearPerCpuRings(&options_, other.tid());
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  FakePtKernel& k = factory_.kernel(0);
  ASSERT_EQ(k.poll_fds().size(), 2u);
  k.ExitTask(self);  // its event polls POLLHUP from now on; the ring's other does not
  SessionThread session(rec->get(), 3.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the loop sees the HUP
  k.RunTask(other.tid());
  k.WriteTrace(testing::TraceBytes(k.options().aux_size / 4, 3));  // the watermark
  EXPECT_EQ(k.wakeups(), 1u);
  EXPECT_TRUE(ReaderCatchesUp(k, std::chrono::milliseconds(2000)))
      << "the other thread's wake-up did not reach the loop";
  auto reason = session.Join();
  ASSERT_TRUE(reason.ok()) << reason.status();
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("duration", {}, &meta).ok());
}

// Rings opened by a drain (here a thread created while recording, per-thread mode) join
// the poll set: their wake-ups drain them long before the loop's timer.
TEST_F(PtRecordingTest, RingsOpenedWhileRecordingWakeTheLoop) {
  SleepingChild target;
  ASSERT_GT(target.pid(), 0);
  options_.record.snapshot = false;
  FollowRun run(options_, target.pid(), /*per_thread=*/true, /*follow=*/false);
  ASSERT_NE(run.rec, nullptr);
  SessionThread session(run.rec.get(), 3.0);  // its first drain reads the FORK
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (run.factory.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(run.factory.size(), 2u) << "no ring for the new thread";
  FakePtKernel& k = run.factory.kernel(1);
  ASSERT_TRUE(k.pt_enabled());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the loop polls it
  k.WriteTrace(testing::TraceBytes(k.options().aux_size / 4, 4));
  EXPECT_EQ(k.wakeups(), 1u);
  EXPECT_TRUE(ReaderCatchesUp(k, std::chrono::milliseconds(2000)))
      << "the new ring's wake-up did not reach the loop";
  auto reason = session.Join();
  ASSERT_TRUE(reason.ok()) << reason.status();
  run.Finish();
}

}  // namespace
}  // namespace ptd::pt
