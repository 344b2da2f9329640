#include "sideband/sideband_set.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sideband/sideband_test_dir.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;

TEST(SidebandSetTest, LoadsMergesAndBuildsTheTimelines) {
  testing::TempDir tmp;
  const std::string dir = tmp.Sub("trace");
  absl::StatusOr<TraceMeta> meta = testing::WriteSidebandTestDir(dir);
  ASSERT_TRUE(meta.ok()) << meta.status();
  absl::StatusOr<Sideband> sb = LoadSideband(dir, *meta);
  ASSERT_TRUE(sb.ok()) << sb.status();

  // Merged: synthesized first, then the two CPUs interleaved by time.
  ASSERT_EQ(sb->records.size(), 2u + 7u + 6u);
  EXPECT_TRUE(sb->sources[sb->records[0].source].synthesized);
  EXPECT_TRUE(sb->sources[sb->records[1].source].synthesized);
  for (size_t i = 3; i < sb->records.size(); ++i) {
    EXPECT_LE(sb->records[i - 1].time_ns, sb->records[i].time_ns);
  }
  EXPECT_EQ(sb->records[2].time_ns, 1000u);
  EXPECT_EQ(sb->records[3].time_ns, 1050u);

  // Memory maps: the synthesized exe from the start, the dlopen'ed lib from 1500, the
  // child inherits both at its fork and loses them at its exec.
  EXPECT_EQ(sb->mmaps.Find(100, 0x401000, 0)->path, "/bin/prog");
  EXPECT_EQ(sb->mmaps.Find(100, 0x7f0000001000, 1499), nullptr);
  EXPECT_EQ(sb->mmaps.Find(100, 0x7f0000001000, 1500)->pgoff, 0x1000u);
  EXPECT_EQ(sb->mmaps.Find(200, 0x7f0000001000, 1650)->path, "/usr/lib/libdl-loaded.so");
  EXPECT_EQ(sb->mmaps.Find(200, 0x401000, 1700), nullptr);
  EXPECT_EQ(sb->mmaps.Find(200, 0x7ffff7fc1000, 1800)->path, "[vdso]");
  // Thread 101's exit does not end the process: the main thread lives.
  EXPECT_NE(sb->mmaps.Find(100, 0x401000, 2600), nullptr);

  // Schedule.
  EXPECT_EQ(sb->schedule.ThreadAt(0, 1300)->tid, 101);
  EXPECT_EQ(sb->schedule.ThreadAt(1, 1300)->tid, 100);
  EXPECT_FALSE(sb->schedule.ThreadAt(0, 2100).has_value());

  // Threads.
  EXPECT_EQ(sb->threads.LastName(100), "prog");
  EXPECT_EQ(sb->threads.LastName(101), "worker");
  EXPECT_EQ(sb->threads.NameAt(200, 1650), "prog");
  EXPECT_EQ(sb->threads.LastName(200), "child");
  EXPECT_EQ(sb->threads.Find(101)->exit_ns, 2500u);

  EXPECT_EQ(sb->stats.lost_records, 5u);
  EXPECT_EQ(sb->stats.aux_records, 1u);
  EXPECT_EQ(sb->stats.aux_truncated, 1u);
  EXPECT_EQ(sb->stats.parse_errors, 0u);
  EXPECT_TRUE(sb->problems.empty());
}

TEST(SidebandSetTest, CorruptFileIsAnErrorNamingFileAndOffset) {
  testing::TempDir tmp;
  const std::string dir = tmp.Sub("trace");
  std::vector<uint8_t> cpu1 = testing::MakeSidebandTestFiles().cpu1;
  const size_t second = cpu1[6] | (cpu1[7] << 8);  // size of the first record
  cpu1[second + 6] = 3;                           // second record: size 3
  cpu1[second + 7] = 0;
  absl::StatusOr<TraceMeta> meta = testing::WriteSidebandTestDir(dir, &cpu1);
  ASSERT_TRUE(meta.ok()) << meta.status();
  absl::StatusOr<Sideband> sb = LoadSideband(dir, *meta);
  ASSERT_FALSE(sb.ok());
  EXPECT_THAT(std::string(sb.status().message()), HasSubstr("sideband/cpu1.data"));
  EXPECT_THAT(std::string(sb.status().message()),
              HasSubstr(absl::StrCat("byte offset ", second, " ")));

  // keep_going: what was read before the error is used, the problem is reported.
  absl::StatusOr<Sideband> partial = LoadSideband(dir, *meta, {.keep_going = true});
  ASSERT_TRUE(partial.ok()) << partial.status();
  EXPECT_EQ(partial->stats.parse_errors, 1u);
  ASSERT_EQ(partial->problems.size(), 1u);
  EXPECT_THAT(partial->problems[0], HasSubstr("cpu1.data"));
  EXPECT_EQ(partial->records.size(), 2u + 7u + 1u);
  EXPECT_EQ(partial->threads.LastName(101), "worker");
}

PerfRecord Rec(PerfRecordBody body, uint32_t pid, uint32_t tid, uint64_t time) {
  PerfRecord r;
  r.body = std::move(body);
  r.sample_id = testing::SidAt(pid, tid, time, 0);
  return r;
}

TEST(SidebandSetTest, MapsEndWithTheLastThreadOfTheProcess) {
  SidebandSource source;
  source.info.file = "mem";
  source.records.push_back(Rec(testing::Map2(5, 0x1000, 0x1000, 0, "/exe"), 5, 5, 10));
  source.records.push_back(Rec(ForkRecord{5, 5, 6, 5, 20}, 5, 5, 20));
  source.records.push_back(Rec(ExitRecord{5, 5, 5, 5, 30}, 5, 5, 30));  // main thread first
  source.records.push_back(Rec(ExitRecord{5, 5, 6, 6, 40}, 5, 6, 40));
  Sideband sb = BuildSideband({std::move(source)});
  EXPECT_NE(sb.mmaps.Find(5, 0x1800, 35), nullptr);  // thread 6 still runs in it
  EXPECT_EQ(sb.mmaps.Find(5, 0x1800, 40), nullptr);
  EXPECT_EQ(sb.mmaps.Changes(5).back().kind, MapChange::Kind::kExit);
}

TEST(SidebandSetTest, RecordsWithoutTimeTakeThePreviousTime) {
  SidebandSource timed;
  timed.info.file = "timed";
  timed.records.push_back(Rec(CommRecord{1, 1, "a", false}, 1, 1, 100));
  PerfRecord untimed = Rec(CommRecord{1, 1, "b", false}, 1, 1, 0);
  untimed.sample_id = SampleId{};
  timed.records.push_back(untimed);
  SidebandSource other;
  other.info.file = "other";
  other.records.push_back(Rec(CommRecord{2, 2, "c", false}, 2, 2, 50));
  Sideband sb = BuildSideband({std::move(timed), std::move(other)});
  ASSERT_EQ(sb.records.size(), 3u);
  EXPECT_EQ(std::get<CommRecord>(sb.records[0].record.body).comm, "c");
  EXPECT_EQ(sb.records[2].time_ns, 100u);
  EXPECT_EQ(sb.stats.records_without_time, 1u);
}

TEST(SidebandSetTest, MissingFileIsAnError) {
  testing::TempDir tmp;
  TraceMeta meta;
  SidebandFile file;
  file.file = "sideband/none.data";
  meta.sideband.push_back(file);
  absl::StatusOr<Sideband> sb = LoadSideband(tmp.path(), meta);
  ASSERT_FALSE(sb.ok());
  EXPECT_THAT(std::string(sb.status().message()), HasSubstr("none.data"));
}

}  // namespace
}  // namespace ptd
