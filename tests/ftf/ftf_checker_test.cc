// FtfChecker and CheckFtfFile: a clean file passes, and each structural fault is caught.
#include "ftf/ftf_checker.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "ftf/ftf_check.h"
#include "ftf/ftf_writer.h"
#include "ftf_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace ptd::ftf {
namespace {

using ::ptd::ftf::testing::PutWord;
using ::ptd::ftf::testing::ReaderOfBytes;
using ::testing::ElementsAre;
using ::ptd::ftf::testing::WriteFtfFile;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> CheckBytes(const std::string& bytes) {
  FtfChecker checker;
  absl::Status read =
      ForEachRecord(*ReaderOfBytes(bytes), [&](const FtfRecord& record) { checker.Add(record); });
  if (!read.ok()) checker.AddReadError(std::string(read.message()));
  return checker.Finish();
}

// A well-formed trace, with `mutate` applied to the writer after the good part.
std::vector<std::string> Check(const std::function<void(FtfWriter&)>& mutate,
                               bool name_threads = true) {
  std::string bytes;
  auto writer = FtfWriter::ToSink(MakeStringSink(&bytes), "memory.ftf");
  if (name_threads) {
    writer->WriteProcess(1, "proc");
    writer->WriteThread(1, 2, "main");
  }
  writer->DurationBegin(1, 2, 100, "c", "main");
  writer->DurationBegin(1, 2, 110, "c", "child");
  writer->DurationEnd(1, 2, 120, "c", "child");
  writer->DurationComplete(1, 2, 130, 140, "c", "leaf");
  writer->Instant(1, 2, 135, "c", "mark");  // instants may come in any order
  writer->DurationEnd(1, 2, 150, "c", "main");
  mutate(*writer);
  EXPECT_TRUE(writer->Close().ok());
  return CheckBytes(bytes);
}

std::string Joined(const std::vector<std::string>& problems) {
  return absl::StrJoin(problems, "\n");
}

TEST(FtfCheckerTest, WellFormedTracePasses) {
  EXPECT_THAT(Check([](FtfWriter&) {}), IsEmpty());
}

TEST(FtfCheckerTest, CatchesEndWithoutBegin) {
  std::vector<std::string> problems =
      Check([](FtfWriter& w) { w.DurationEnd(1, 2, 200, "c", "x"); });
  EXPECT_THAT(Joined(problems), HasSubstr("thread 1/2: offset"));
  EXPECT_THAT(Joined(problems), HasSubstr("end at ts 200 with no open slice"));
}

TEST(FtfCheckerTest, CatchesSlicesThatNeverEnd) {
  std::vector<std::string> problems = Check([](FtfWriter& w) {
    w.DurationBegin(1, 2, 200, "c", "outer");
    w.DurationBegin(1, 2, 210, "c", "inner");
  });
  EXPECT_THAT(problems,
              ElementsAre("thread 1/2: 2 slice(s) never end (innermost 'inner' began at ts 210)"));
}

TEST(FtfCheckerTest, CatchesTimeGoingBackwardsOnAThread) {
  std::vector<std::string> problems = Check([](FtfWriter& w) {
    w.DurationBegin(1, 2, 90, "c", "late");
    w.DurationEnd(1, 2, 95, "c", "late");
  });
  EXPECT_THAT(Joined(problems), HasSubstr("begin at ts 90 goes back in time (previous begin/end at 150)"));
}

TEST(FtfCheckerTest, OtherThreadsHaveTheirOwnClock) {
  std::vector<std::string> problems = Check([](FtfWriter& w) {
    w.WriteThread(1, 3, "other");
    w.DurationBegin(1, 3, 5, "c", "early");
    w.DurationEnd(1, 3, 6, "c", "early");
  });
  EXPECT_THAT(problems, IsEmpty());
}

TEST(FtfCheckerTest, CatchesUnnamedThreadsAndProcesses) {
  std::vector<std::string> problems = Check([](FtfWriter&) {}, /*name_threads=*/false);
  EXPECT_THAT(Joined(problems), HasSubstr("thread 1/2: has events (first at offset"));
  EXPECT_THAT(Joined(problems), HasSubstr("but no kernel object record names it"));
  EXPECT_THAT(Joined(problems), HasSubstr("process 1: has threads with events but no kernel object"));
}

TEST(FtfCheckerTest, CatchesThreadLinkedToAnotherProcess) {
  std::vector<std::string> problems = Check([](FtfWriter& w) {
    w.WriteProcess(9, "p9");
    w.WriteThread(9, 4, "t");
    w.Instant(1, 4, 500, "c", "i");
  });
  EXPECT_THAT(Joined(problems),
              HasSubstr("thread 1/4: its kernel object record links it to process 9, its events to 1"));
}

TEST(FtfCheckerTest, CatchesThreadWithoutProcessArgument) {
  std::string bytes;
  {
    auto writer = FtfWriter::ToSink(MakeStringSink(&bytes), "memory.ftf");
    writer->WriteProcess(1, "proc");
    writer->Instant(1, 2, 100, "c", "i");
    ASSERT_TRUE(writer->Close().ok());
  }
  // Kernel object record for thread 2 with an inline name and no arguments.
  PutWord(bytes, 7 | (3 << 4) | (uint64_t{2} << 16) | (uint64_t{0x8001} << 24));
  PutWord(bytes, 2);
  bytes += std::string("t\0\0\0\0\0\0\0", 8);
  EXPECT_THAT(CheckBytes(bytes),
              ElementsAre("thread 1/2: its kernel object record has no `process` koid argument"));
}

TEST(FtfCheckerTest, CatchesNestingDeeperThanPerfettoKeeps) {
  std::vector<std::string> problems = Check([](FtfWriter& w) {
    for (int i = 0; i < 600; ++i) w.DurationBegin(1, 2, 200 + i, "c", "deep");
    for (int i = 0; i < 600; ++i) w.DurationEnd(1, 2, 800 + i, "c", "deep");
  });
  ASSERT_EQ(problems.size(), 1u) << Joined(problems);
  EXPECT_THAT(problems[0], HasSubstr("nesting depth 513 exceeds Perfetto's limit of 512"));
}

TEST(FtfCheckerTest, CatchesCompleteEventEndingBeforeItBegins) {
  std::vector<std::string> problems =
      Check([](FtfWriter& w) { w.DurationComplete(1, 2, 300, 200, "c", "bad"); });
  EXPECT_THAT(Joined(problems), HasSubstr("complete event 'bad' ends (200) before it begins (300)"));
}

TEST(FtfCheckerTest, ReportsATruncatedFile) {
  std::string bytes;
  {
    auto writer = FtfWriter::ToSink(MakeStringSink(&bytes), "memory.ftf");
    writer->WriteProcess(1, "proc");
    ASSERT_TRUE(writer->Close().ok());
  }
  bytes.resize(bytes.size() - 8);
  EXPECT_THAT(Joined(CheckBytes(bytes)), HasSubstr("unreadable: memory.ftf: offset"));
}

TEST(FtfCheckerTest, LimitsTheListButCountsEveryProblem) {
  FtfChecker checker(/*max_problems=*/3);
  for (int i = 0; i < 10; ++i) checker.AddReadError("x");
  std::vector<std::string> problems = checker.Finish();
  EXPECT_EQ(checker.problem_count(), 10u);
  ASSERT_EQ(problems.size(), 4u);
  EXPECT_EQ(problems[3], "... and 7 more");
}

TEST(CheckFtfFileTest, PassesAGoodFileAndListsProblemsOfABadOne) {
  ptd::testing::TempDir dir;
  const std::string good = dir.Sub("good.ftf.gz");
  const std::string bad = dir.Sub("bad.ftf");
  for (const std::string& path : {good, bad}) {
    ASSERT_TRUE(WriteFtfFile(path, [&](FtfWriter& writer) {
                  writer.WriteProcess(1, "p");
                  writer.WriteThread(1, 2, "t");
                  writer.DurationBegin(1, 2, 1, "c", "f");
                  if (path == good) writer.DurationEnd(1, 2, 2, "c", "f");
                }).ok());
  }
  EXPECT_TRUE(CheckFtfFile(good).ok()) << CheckFtfFile(good);
  absl::Status status = CheckFtfFile(bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("bad.ftf: 1 structural problem(s)"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("never end"));
  EXPECT_FALSE(CheckFtfFile(dir.Sub("missing.ftf")).ok());
}

}  // namespace
}  // namespace ptd::ftf
