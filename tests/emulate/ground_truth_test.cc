// Ground truth format round trip, reader errors, and the RSP-based frame rules.
#include <cstdio>
#include <cstring>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "recorder/emulate/ground_truth.h"
#include "recorder/emulate/ground_truth_writer.h"
#include "recorder/emulate/stack_frame_tracker.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::ptd::testing::TempDir;

TEST(GroundTruthTest, RoundTripKeepsInstructionsEventsThreadsAndTimes) {
  TempDir tmp;
  const std::string path = tmp.Sub("gt.bin");
  {
    absl::StatusOr<GroundTruthWriter> writer = GroundTruthWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    // Two interleaved threads, a run longer than one INSNS record, and every event.
    for (int i = 0; i < 600; ++i) writer->Instruction(10, 10, 0x401000 + 3 * i, 1000 + i);
    writer->Instruction(10, 11, 0x7fff00000000, 2000);
    writer->Call(10, 11, 2001, 0x7fff00000000, 0x7fff00000100, 0x7ffe0000, 1, 0);
    writer->Instruction(10, 10, 0x400000, 2002);  // backwards from the previous IP of 10
    writer->Return(10, 11, 2003, 0x7fff00000100, 0x7fff00000005, 0);
    writer->Unwind(10, 10, 2004, 0x400000, 0x400100, 6, 2);
    writer->Syscall(10, 10, 2005, 0x400100);
    writer->Signal(10, 10, 2006, 0x400102, 0x400800, 10);
    writer->Lost(10, 10, 2007, 42);
    writer->End(10, 11, 2008);
    ASSERT_TRUE(writer->Close().ok());
  }
  absl::StatusOr<std::vector<GroundTruthThread>> threads = LoadGroundTruth(path);
  ASSERT_TRUE(threads.ok()) << threads.status();
  ASSERT_EQ(threads->size(), 2u);
  const GroundTruthThread& a = (*threads)[0];
  const GroundTruthThread& b = (*threads)[1];
  EXPECT_EQ(a.tid, 10);
  EXPECT_EQ(b.tid, 11);
  ASSERT_EQ(a.ips.size(), 601u);
  for (int i = 0; i < 600; ++i) ASSERT_EQ(a.ips[i], 0x401000u + 3 * i);
  EXPECT_EQ(a.ips[600], 0x400000u);
  ASSERT_EQ(b.ips.size(), 1u);
  EXPECT_EQ(b.ips[0], 0x7fff00000000u);
  ASSERT_EQ(b.events.size(), 3u);
  EXPECT_EQ(b.events[0].type, GroundTruthTag::kCall);
  EXPECT_EQ(b.events[0].to, 0x7fff00000100u);
  EXPECT_EQ(b.events[0].sp, 0x7ffe0000u);
  EXPECT_EQ(b.events[0].time, 2001u);
  EXPECT_EQ(b.events[1].type, GroundTruthTag::kReturn);
  EXPECT_EQ(b.events[2].type, GroundTruthTag::kEnd);
  EXPECT_EQ(b.events[2].time, 2008u);
  ASSERT_EQ(a.events.size(), 4u);
  EXPECT_EQ(a.events[0].type, GroundTruthTag::kUnwind);
  EXPECT_EQ(a.events[0].count, 6u);
  EXPECT_EQ(a.events[0].depth, 2u);
  EXPECT_EQ(a.event_insn_index[0], 601u);
  EXPECT_EQ(a.events[1].type, GroundTruthTag::kSyscall);
  EXPECT_EQ(a.events[2].type, GroundTruthTag::kSignal);
  EXPECT_EQ(a.events[2].count, 10u);
  EXPECT_EQ(a.lost, 42u);
}

TEST(GroundTruthTest, ReaderNamesFileAndOffsetOfATruncatedRecord) {
  TempDir tmp;
  const std::string path = tmp.Sub("gt.bin");
  {
    absl::StatusOr<GroundTruthWriter> writer = GroundTruthWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    writer->Call(1, 1, 5, 0x1000, 0x2000, 0x7fff0000, 1, 0);
    ASSERT_TRUE(writer->Close().ok());
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  ASSERT_TRUE(bytes.ok());
  bytes->resize(bytes->size() - 3);
  absl::StatusOr<GroundTruthReader> reader = GroundTruthReader::FromBytes(*bytes, "cut.bin");
  ASSERT_TRUE(reader.ok());
  GroundTruthRecord record;
  absl::StatusOr<bool> next = reader->Next(&record);
  ASSERT_FALSE(next.ok());
  EXPECT_NE(std::string(next.status().message()).find("cut.bin: offset"), std::string::npos)
      << next.status();
  EXPECT_FALSE(GroundTruthReader::FromBytes({'x', 'y'}, "tiny").ok());
}

ExecutedInsn Call(uint64_t ip, uint64_t target) { return {ip, target, 5, BranchKind::kDirectCall}; }
ExecutedInsn Ret(uint64_t ip, uint64_t to) { return {ip, to, 1, BranchKind::kReturn}; }
ExecutedInsn Mov(uint64_t ip) { return {ip, ip + 3, 3, BranchKind::kNone}; }

TEST(StackFrameTrackerTest, FramesLiveWhileRspStaysBelowItsValueAtTheCall) {
  TempDir tmp;
  const std::string path = tmp.Sub("gt.bin");
  {
    absl::StatusOr<GroundTruthWriter> writer = GroundTruthWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    StackFrameTracker frames(1, 1);
    uint64_t rsp = 0x10000;
    // main calls a, a calls b, b calls c: three frames.
    for (int i = 0; i < 3; ++i) {
      frames.OnRetire(Call(0x1000 + i * 0x100, 0x1100 + i * 0x100), rsp, rsp - 8, 1, &*writer);
      rsp -= 8;
      rsp -= 0x20;  // locals: RSP moves below, frame still live
      frames.OnRetire(Mov(0x1105 + i * 0x100), rsp + 0x20, rsp, 1, &*writer);
    }
    EXPECT_EQ(frames.depth(), 3u);
    // c returns normally: RSP back to its value at the call.
    frames.OnRetire(Ret(0x1350, 0x1205), rsp, 0x10000 - 2 * 0x28, 2, &*writer);
    EXPECT_EQ(frames.depth(), 2u);
    // A call to the next instruction (PIC thunk) opens no frame.
    frames.OnRetire(Call(0x1210, 0x1215), 0x10000 - 2 * 0x28, 0x10000 - 2 * 0x28 - 8, 2, &*writer);
    EXPECT_EQ(frames.depth(), 2u);
    // longjmp-like: RSP jumps above both remaining frames with a mov.
    frames.OnRetire(Mov(0x1220), 0x10000 - 0x60, 0x10000 + 0x10, 3, &*writer);
    EXPECT_EQ(frames.depth(), 0u);
    ASSERT_TRUE(writer->Close().ok());
  }
  absl::StatusOr<std::vector<GroundTruthThread>> threads = LoadGroundTruth(path);
  ASSERT_TRUE(threads.ok());
  ASSERT_EQ(threads->size(), 1u);
  const auto& events = (*threads)[0].events;
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].type, GroundTruthTag::kCall);
  EXPECT_EQ(events[2].type, GroundTruthTag::kCall);
  EXPECT_EQ(events[2].depth, 3u);
  EXPECT_EQ(events[3].type, GroundTruthTag::kReturn);
  EXPECT_EQ(events[3].depth, 2u);
  EXPECT_EQ(events[4].type, GroundTruthTag::kUnwind);
  EXPECT_EQ(events[4].count, 2u);
  EXPECT_EQ(events[4].depth, 0u);
}

}  // namespace
}  // namespace ptd
