#include "sideband/thread_names.h"

#include "gtest/gtest.h"

namespace ptd {
namespace {

TEST(ThreadTableTest, NamesChangeOverTimeAndForkInheritsTheParentName) {
  ThreadTable t;
  t.OnComm(5, 5, "launcher", false, 10);
  t.OnComm(5, 5, "prog", true, 20);  // exec
  t.OnFork(5, 5, 6, 5, 30);          // thread
  t.OnComm(5, 6, "worker-1", false, 40);
  EXPECT_EQ(t.NameAt(5, 15), "launcher");
  EXPECT_EQ(t.NameAt(5, 25), "prog");
  EXPECT_EQ(t.NameAt(6, 35), "prog");
  EXPECT_EQ(t.NameAt(6, 45), "worker-1");
  EXPECT_EQ(t.LastName(6), "worker-1");
  EXPECT_EQ(t.PidOf(6), 5);
  const ThreadInfo* info = t.Find(6);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->parent_tid, 5);
  EXPECT_EQ(info->start_ns, 30u);
  EXPECT_TRUE(t.Find(5)->names[1].exec);
}

TEST(ThreadTableTest, ExitAndTidReuse) {
  ThreadTable t;
  t.OnFork(5, 5, 6, 5, 30);
  t.OnExit(5, 6, 50);
  EXPECT_EQ(t.Find(6)->exit_ns, 50u);
  t.OnFork(9, 1, 6, 1, 60);  // tid 6 reused by another process
  EXPECT_EQ(t.PidOf(6), 9);
  EXPECT_EQ(t.Find(6)->exit_ns, kForever);
  t.OnSeen(12, 13);
  EXPECT_EQ(t.PidOf(13), 12);
  t.OnSeen(0, 0);  // idle
  EXPECT_EQ(t.Find(0), nullptr);
  EXPECT_EQ(t.Threads().size(), 2u);
}

}  // namespace
}  // namespace ptd
