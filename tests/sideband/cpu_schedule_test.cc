#include "sideband/cpu_schedule.h"

#include "gtest/gtest.h"

namespace ptd {
namespace {

int TidAt(const CpuSchedule& s, int cpu, uint64_t t) {
  std::optional<CpuInterval> i = s.ThreadAt(cpu, t);
  return i ? i->tid : -1;
}

TEST(CpuScheduleTest, PerThreadSwitchesMakeIntervals) {
  CpuSchedule s;
  s.AddSwitch(0, 10, 11, /*out=*/false, 100);
  s.AddSwitch(0, 10, 11, /*out=*/true, 200);
  s.AddSwitch(1, 10, 11, false, 250);  // migrated
  s.AddSwitch(0, 10, 12, false, 300);
  EXPECT_EQ(TidAt(s, 0, 99), -1);
  EXPECT_EQ(TidAt(s, 0, 100), 11);
  EXPECT_EQ(TidAt(s, 0, 199), 11);
  EXPECT_EQ(TidAt(s, 0, 200), -1);
  EXPECT_EQ(TidAt(s, 1, 260), 11);
  EXPECT_EQ(TidAt(s, 0, 5000), 12);  // still running at the end
  std::vector<CpuInterval> cpu0 = s.Intervals(0);
  ASSERT_EQ(cpu0.size(), 2u);
  EXPECT_EQ(cpu0[0].begin_ns, 100u);
  EXPECT_EQ(cpu0[0].end_ns, 200u);
  EXPECT_EQ(cpu0[0].pid, 10);
  EXPECT_EQ(cpu0[1].end_ns, kForever);
  EXPECT_EQ(s.Cpus(), (std::vector<int>{0, 1}));
}

TEST(CpuScheduleTest, CpuWideSwitchesUseTheSampleThreadAndNextPrev) {
  CpuSchedule s;
  // First record on CPU 2: task 21 switches in, from 20 which ran since before.
  s.AddSwitchCpuWide(2, 21, 21, /*out=*/false, 20, 20, 1000);
  s.AddSwitchCpuWide(2, 21, 21, /*out=*/true, 30, 31, 2000);
  s.AddSwitchCpuWide(2, 30, 31, /*out=*/false, 21, 21, 2010);
  EXPECT_EQ(TidAt(s, 2, 500), 20);
  EXPECT_EQ(TidAt(s, 2, 1000), 21);
  EXPECT_EQ(TidAt(s, 2, 2005), -1);  // between switch out and the next switch in
  EXPECT_EQ(TidAt(s, 2, 2010), 31);
  EXPECT_EQ(s.ThreadAt(2, 2010)->pid, 30);
}

TEST(CpuScheduleTest, LostRecordsStillGiveConsistentIntervals) {
  CpuSchedule s;
  s.AddSwitch(0, 1, 1, false, 10);
  // Thread 1's switch out was lost: thread 2 switching in ends it.
  s.AddSwitch(0, 2, 2, false, 20);
  // Thread 3's switch in was lost: it ran since the previous event on the CPU.
  s.AddSwitch(0, 2, 2, true, 30);
  s.AddSwitch(0, 3, 3, true, 40);
  EXPECT_EQ(TidAt(s, 0, 15), 1);
  EXPECT_EQ(TidAt(s, 0, 25), 2);
  EXPECT_EQ(TidAt(s, 0, 35), 3);
  EXPECT_EQ(TidAt(s, 0, 45), -1);
  // Intervals never overlap and are in time order.
  std::vector<CpuInterval> all = s.Intervals(0);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LE(all[i - 1].end_ns, all[i].begin_ns);
}

}  // namespace
}  // namespace ptd
