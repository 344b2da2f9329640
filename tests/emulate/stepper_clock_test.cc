// The ptrace stepper's virtual clock (recorder/emulate/stepper_clock.h) on a real clock the
// test sets: instructions cost 1 ns, a system call what it took less ptrace's round trip
// (at least 1 us), and the kernel's records land inside the call that made them.
#include "recorder/emulate/stepper_clock.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace ptd {
namespace {

class StepperClockTest : public ::testing::Test {
 protected:
  StepperClockOptions Options(bool one_clock = false) {
    StepperClockOptions options;
    options.one_clock = one_clock;
    options.real_clock = [this] { return real_; };
    return options;
  }
  // A single step of `tid` that took `ns` of real time.
  void Step(StepperClock& clock, int tid, uint64_t ns) {
    clock.Resumed(tid);
    real_ += ns;
    clock.StepEnded(tid);
  }
  // The syscall instruction of `tid` retires, enters the kernel and runs for `ns` of real
  // time between its entry and exit stops; returns its kernel entry.
  uint64_t Syscall(StepperClock& clock, int tid, uint64_t ns) {
    const uint64_t insn = clock.Retire(tid);
    const uint64_t entry = clock.EnterKernel(tid, insn);
    EXPECT_EQ(entry, insn + 1) << "the syscall instruction has its 1 ns";
    clock.Resumed(tid);
    real_ += 7;
    clock.SyscallEntryStop(tid);
    clock.Resumed(tid);
    real_ += ns;
    clock.SyscallExitStop(tid);
    return entry;
  }
  uint64_t real_ = 1'000'000;
};

TEST_F(StepperClockTest, AnInstructionCostsOneNanosecondAndACallWhatItTook) {
  StepperClock clock(Options());
  clock.AddThread(10, 10);
  EXPECT_EQ(clock.Retire(10), 1000u);
  Step(clock, 10, 9);
  EXPECT_EQ(clock.Retire(10), 1001u);
  Step(clock, 10, 5);  // ptrace's cheapest round trip
  const uint64_t entry = Syscall(clock, 10, 50'000'005);
  EXPECT_EQ(entry, 1003u);
  EXPECT_EQ(clock.Now(10), entry + 50'000'000);
  // A call faster than 1 us lasts 1 us.
  const uint64_t fast = Syscall(clock, 10, 100);
  EXPECT_EQ(clock.Now(10), fast + StepperClock::kMinSyscallNs);
}

TEST_F(StepperClockTest, TheKernelsRecordsLandInsideTheCallThatMadeThem) {
  StepperClock clock(Options());
  const uint64_t before_start = real_ - 10;
  clock.AddThread(10, 10);
  clock.Retire(10);
  Step(clock, 10, 5);
  const uint64_t call_real = real_ + 7;  // its work begins at the resume after the entry stop
  const uint64_t entry = Syscall(clock, 10, 2'000'000);
  const uint64_t next = clock.Now(10);
  // The exec that started the program: before its first instruction.
  EXPECT_EQ(clock.ToVirtual(10, 10, before_start), 999u);
  // In the call: at least 500 ns after its entry, in real-time order, before the next
  // instruction.
  EXPECT_EQ(clock.ToVirtual(10, 10, call_real + 1), entry + StepperClock::kRecordLeadNs);
  EXPECT_EQ(clock.ToVirtual(10, 10, call_real + 1'000'000), entry + 1'000'000);
  EXPECT_EQ(clock.ToVirtual(10, 10, call_real + 2'000'000), next - 1);
  real_ += 100;
  const uint64_t end = clock.ThreadEnded(10);
  EXPECT_EQ(end, next);
  // Its EXIT record, after its end; a thread never seen, in its process or elsewhere.
  EXPECT_EQ(clock.ToVirtual(10, 10, real_ + 50), end);
  EXPECT_EQ(clock.ToVirtual(10, 11, call_real + 1'000'000), entry + 1'000'000);
  EXPECT_EQ(clock.ToVirtual(99, 99, real_ + 50), end);
}

TEST_F(StepperClockTest, AForkedChildStartsAfterItsForkRecord) {
  StepperClock clock(Options());
  clock.AddThread(10, 10);
  clock.Retire(10);
  Step(clock, 10, 5);
  const uint64_t insn = clock.Retire(10);
  const uint64_t entry = clock.EnterKernel(10, insn);
  clock.SyscallEntryStop(10);
  clock.Resumed(10);
  real_ += 30'000;  // the fork's FORK record, then its event stop
  const uint64_t fork_record_real = real_ - 1;
  clock.TaskCreated(10, 20, /*new_process=*/true);
  clock.AddThread(20, 20);
  real_ += 10;
  clock.SyscallExitStop(10);
  EXPECT_GT(clock.Now(20), clock.ToVirtual(10, 10, fork_record_real));
  EXPECT_GE(clock.Now(20), entry + 30'000);
  // The parent's clock is its own: its call lasted what it took.
  EXPECT_EQ(clock.Now(10), entry + 30'010 - 5);
}

TEST_F(StepperClockTest, OnOneClockAThreadChangeLeavesRoomForASwitch) {
  StepperClock clock(Options(/*one_clock=*/true));
  clock.AddThread(10, 10);
  clock.AddThread(20, 20);
  EXPECT_EQ(clock.Retire(10), 1000u);
  EXPECT_EQ(clock.Retire(10), 1001u);
  EXPECT_EQ(clock.Retire(20), 1002u + StepperClock::kThreadChangeNs);
}

TEST_F(StepperClockTest, TheWallAxisIsTheRealClock) {
  StepperClockOptions options = Options();
  options.wall = true;
  StepperClock clock(options);
  clock.AddThread(10, 10);
  EXPECT_EQ(clock.Retire(10), real_);
  EXPECT_EQ(clock.EnterKernel(10, 42), 42u);
  EXPECT_EQ(clock.ToVirtual(10, 10, 12345), 12345u);
}

}  // namespace
}  // namespace ptd
