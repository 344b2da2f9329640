#include "sideband/mmap_timeline.h"

#include "gtest/gtest.h"

namespace ptd {
namespace {

Mapping Map(uint64_t start, uint64_t end, uint64_t pgoff, const std::string& path) {
  Mapping m;
  m.start = start;
  m.end = end;
  m.pgoff = pgoff;
  m.path = path;
  return m;
}

TEST(MmapTimelineTest, FindsMappingOnlyWhileItIsInPlace) {
  MmapTimeline t;
  t.AddMapping(1, Map(0x1000, 0x3000, 0, "/a"), 100);
  EXPECT_EQ(t.Find(1, 0x2000, 99), nullptr);
  ASSERT_NE(t.Find(1, 0x2000, 100), nullptr);
  EXPECT_EQ(t.Find(1, 0x2fff, 100)->path, "/a");
  EXPECT_EQ(t.Find(1, 0x3000, 100), nullptr);  // end is exclusive
  EXPECT_EQ(t.Find(2, 0x2000, 100), nullptr);  // other process
  t.Exit(1, 200);
  EXPECT_NE(t.Find(1, 0x2000, 199), nullptr);
  EXPECT_EQ(t.Find(1, 0x2000, 200), nullptr);
}

TEST(MmapTimelineTest, OverlapInTheMiddleSplitsTheOldMapping) {
  MmapTimeline t;
  t.AddMapping(1, Map(0x10000, 0x20000, 0x100000, "/big"), 10);
  t.AddMapping(1, Map(0x14000, 0x15000, 0, "/patch"), 20);
  // Before the patch: the whole old mapping.
  EXPECT_EQ(t.Find(1, 0x14800, 15)->path, "/big");
  // After: three pieces; the right piece's file offset moves with its start.
  std::vector<Mapping> now = t.MappingsAt(1, 20);
  ASSERT_EQ(now.size(), 3u);
  EXPECT_EQ(now[0].start, 0x10000u);
  EXPECT_EQ(now[0].end, 0x14000u);
  EXPECT_EQ(now[0].pgoff, 0x100000u);
  EXPECT_EQ(now[1].path, "/patch");
  EXPECT_EQ(now[2].start, 0x15000u);
  EXPECT_EQ(now[2].end, 0x20000u);
  EXPECT_EQ(now[2].pgoff, 0x100000u + 0x5000u);
  EXPECT_EQ(now[2].path, "/big");
  EXPECT_EQ(t.Find(1, 0x14800, 20)->path, "/patch");
  EXPECT_EQ(t.Find(1, 0x16000, 25)->pgoff, 0x105000u);
}

TEST(MmapTimelineTest, OverlapAtEitherEndTruncatesAndFullCoverReplaces) {
  MmapTimeline t;
  t.AddMapping(1, Map(0x1000, 0x5000, 0, "/left"), 1);
  t.AddMapping(1, Map(0x8000, 0xa000, 0, "/right"), 1);
  t.AddMapping(1, Map(0x4000, 0x9000, 0, "/mid"), 2);  // cuts the tail of /left and head of /right
  std::vector<Mapping> now = t.MappingsAt(1, 2);
  ASSERT_EQ(now.size(), 3u);
  EXPECT_EQ(now[0].path, "/left");
  EXPECT_EQ(now[0].end, 0x4000u);
  EXPECT_EQ(now[1].path, "/mid");
  EXPECT_EQ(now[2].path, "/right");
  EXPECT_EQ(now[2].start, 0x9000u);
  EXPECT_EQ(now[2].pgoff, 0x1000u);
  t.AddMapping(1, Map(0x0, 0x10000, 0, "/all"), 3);
  now = t.MappingsAt(1, 3);
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].path, "/all");
  // History is kept.
  EXPECT_EQ(t.MappingsAt(1, 1).size(), 2u);
  EXPECT_EQ(t.MappingsAt(1, 2).size(), 3u);
}

TEST(MmapTimelineTest, ForkCopiesParentMapsAndThreadsShareThem) {
  MmapTimeline t;
  t.AddMapping(1, Map(0x1000, 0x2000, 0, "/exe"), 1);
  t.AddMapping(1, Map(0x5000, 0x6000, 0, "/lib"), 2);
  t.Fork(1, 1, 3);  // a thread: no new process
  EXPECT_EQ(t.Pids(), std::vector<int>{1});
  t.Fork(1, 7, 4);
  t.AddMapping(1, Map(0x9000, 0xa000, 0, "/later-in-parent"), 5);
  std::vector<Mapping> child = t.MappingsAt(7, 6);
  ASSERT_EQ(child.size(), 2u);
  EXPECT_EQ(child[0].path, "/exe");
  EXPECT_EQ(child[1].path, "/lib");
  EXPECT_EQ(t.Find(7, 0x1800, 3), nullptr);  // not before the fork
  EXPECT_EQ(t.Find(7, 0x9800, 6), nullptr);  // parent's later maps are not the child's
  const std::vector<MapChange>& changes = t.Changes(7);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].kind, MapChange::Kind::kFork);
  EXPECT_EQ(changes[0].parent_pid, 1);
  EXPECT_TRUE(changes[1].inherited);
  EXPECT_EQ(changes[1].mapping.path, "/exe");
}

TEST(MmapTimelineTest, ExecResetsMapsAndKeepsTheNewImage) {
  MmapTimeline t;
  t.AddMapping(7, Map(0x1000, 0x2000, 0, "/bin/sh"), 1);
  t.Exec(7, 10);
  t.AddMapping(7, Map(0x400000, 0x401000, 0, "/bin/prog"), 11);
  t.AddMapping(7, Map(0x7f0000, 0x7f1000, 0, "/lib/ld.so"), 12);
  EXPECT_EQ(t.Find(7, 0x1800, 9)->path, "/bin/sh");
  EXPECT_EQ(t.Find(7, 0x1800, 11), nullptr);
  std::vector<Mapping> now = t.MappingsAt(7, 20);
  ASSERT_EQ(now.size(), 2u);
  EXPECT_EQ(now[0].path, "/bin/prog");
  EXPECT_EQ(now[1].path, "/lib/ld.so");
  const std::vector<MapChange>& changes = t.Changes(7);
  ASSERT_EQ(changes.size(), 4u);
  EXPECT_EQ(changes[1].kind, MapChange::Kind::kExec);
  EXPECT_EQ(changes[1].time_ns, 10u);
  EXPECT_EQ(t.MappedFiles(), (std::vector<std::string>{"/bin/prog", "/bin/sh", "/lib/ld.so"}));
}

TEST(MmapTimelineTest, WrappedLengthIsClampedNotInverted) {
  MmapTimeline t;
  t.AddMapping(1, Map(0xfffffffffffff000, 0x1000 /* wrapped */, 0, "/top"), 1);
  EXPECT_NE(t.Find(1, 0xfffffffffffff800, 1), nullptr);
}

}  // namespace
}  // namespace ptd
