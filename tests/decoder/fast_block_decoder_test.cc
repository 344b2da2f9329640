// The fast flow decoder (decoder/flow/fast_block_decoder.h) against libipt's block decoder on
// programs recorded here by the emulator: the same flow events, statistics and FTF bytes
// on every time axis, with overflows, per-CPU streams, code replaced at run time
// (dlopen/exec: the block cache must be dropped) and signals; then on PT bytes mutated at
// random (both decoders must report the same errors at the same offsets and go on the
// same way, except where no one reading exists: decoder_diff.h). The real traces of
// ../shared/samples are compared in samples_test.cc, and every ground-truth recording in
// ground_truth_test.cc.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/decoder/decoder_diff.h"
#include "tests/decoder/recorded_program.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using testing::CompareFastWithLibiptBlock;
using testing::Record;
using testing::Recording;

DecodeOptions OnAxis(TimeAxisChoice axis) {
  DecodeOptions options;
  options.axis = axis;
  return options;
}

void ExpectIdenticalOnEveryAxis(const Recording& rec) {
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  EXPECT_EQ(CompareFastWithLibiptBlock(rec.trace, OnAxis(TimeAxisChoice::kTime)), "");
  EXPECT_EQ(CompareFastWithLibiptBlock(rec.trace, OnAxis(TimeAxisChoice::kInstructions)), "");
  EXPECT_EQ(CompareFastWithLibiptBlock(rec.trace, OnAxis(TimeAxisChoice::kCycles)), "");
}

TEST(FastBlockDecoderTest, CallsWithCyclesAndOverflowsAreIdentical) {
  ExpectIdenticalOnEveryAxis(Record("ptd_prog_calls", {"--timing", "high", "--emulate-overflow-every", "6144"}));
}

TEST(FastBlockDecoderTest, PerCpuThreadsAreIdentical) {
  ExpectIdenticalOnEveryAxis(Record("ptd_prog_threads", {"--virtual-cpus", "2"}));
}

TEST(FastBlockDecoderTest, CodeReplacedAtRunTimeIsIdentical) {
  ExpectIdenticalOnEveryAxis(Record("ptd_prog_dlopen_swap", {}));
  ExpectIdenticalOnEveryAxis(Record("ptd_prog_fork_exec", {}));
}

TEST(FastBlockDecoderTest, SignalsAreIdentical) { ExpectIdenticalOnEveryAxis(Record("ptd_prog_signal", {})); }

// Parallel decoding drives the same block source through pieces: --jobs 2 with the fast
// decoder writes what one libipt block decoder writes.
TEST(FastBlockDecoderTest, ParallelFastEqualsSerialLibiptBlock) {
  Recording rec = Record("ptd_prog_calls", {"--psb-period", "1024"});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  ptd::testing::TempDir tmp;
  DecodeOptions serial;
  serial.decoder = DecoderKind::kBlock;
  ASSERT_TRUE(DecodeTraceToFtf(rec.trace, tmp.Sub("serial.ftf"), serial).ok());
  DecodeOptions parallel;
  parallel.decoder = DecoderKind::kFast;
  parallel.jobs = 2;
  parallel.piece_bytes = 4096;
  absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(rec.trace, tmp.Sub("parallel.ftf"), parallel);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GT(result->stats[Stat::kInstructions], 0u);
  EXPECT_EQ(*ReadFileToString(tmp.Sub("serial.ftf")), *ReadFileToString(tmp.Sub("parallel.ftf")));
}

// Random byte changes in the PT stream: sync, resync, errors (at the same offsets) and
// whatever follows them must come out the same from both decoders, except where a corrupt
// IP leads into bytes the program never executed (Zydis and libipt disagree on those) or
// libipt's own block and instruction decoders disagree (decoder_diff.h).
TEST(FastBlockDecoderTest, MutatedStreamsDecodeIdentically) {
  Recording rec = Record("ptd_prog_calls", {"--psb-period", "1024"});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  std::vector<std::string> streams;
  for (const auto& entry : std::filesystem::directory_iterator(rec.trace + "/aux")) {
    if (entry.path().extension() == ".pt") streams.push_back(entry.path().string());
  }
  ASSERT_FALSE(streams.empty());
  absl::flat_hash_set<uint64_t> executed;
  for (const GroundTruthThread& thread : rec.truth) executed.insert(thread.ips.begin(), thread.ips.end());
  ASSERT_FALSE(executed.empty());
  std::mt19937_64 random(16);
  int with_errors = 0;
  int excused = 0;
  constexpr int kMutations = 40;
  for (int m = 0; m < kMutations; ++m) {
    ptd::testing::TempDir tmp;
    std::string trace = tmp.Sub("trace");
    std::filesystem::copy(rec.trace, trace, std::filesystem::copy_options::recursive);
    const std::string& original = streams[random() % streams.size()];
    std::string path = trace + "/aux/" + std::filesystem::path(original).filename().string();
    std::string bytes = *ReadFileToString(path);
    ASSERT_FALSE(bytes.empty());
    int changes = 1 + static_cast<int>(random() % 8);
    for (int c = 0; c < changes; ++c) bytes[random() % bytes.size()] = static_cast<char>(random());
    ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
    DecodeOptions options = OnAxis(m % 2 == 0 ? TimeAxisChoice::kTime : TimeAxisChoice::kInstructions);
    std::string excuse;
    std::string difference = testing::CompareFastWithLibiptBlockOnCorruptTrace(trace, options, executed, &excuse);
    EXPECT_EQ(difference, "") << "mutation " << m;
    if (!excuse.empty()) {
      ++excused;
      std::printf("mutation %d: the decoders differ, excused: %s\n", m, excuse.c_str());
    }
    options.decoder = DecoderKind::kBlock;
    absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(trace, "", options);
    if (result.ok() && result->stats[Stat::kErrors] > 0) ++with_errors;
  }
  // Otherwise the mutations hit nothing that matters and the test proves little.
  EXPECT_GE(with_errors, kMutations / 4);
  // Most corrupt streams must compare in full: the excuses may not hide all.
  EXPECT_LE(excused, kMutations / 4);
}

// A program's loops recorded without MTC/CYC (`--timing low`) are read through
// PacketQuery, whose TNT bits the tracelet cache takes a packet at a time (RunQuick):
// a good part of the blocks must come from tracelets, and the flow events, counters and FTF must
// still be libipt's block decoder's.
TEST(FastBlockDecoderTest, TraceletsTakeMostBlocksIdentically) {
  Recording rec = Record("ptd_prog_calls", {"--timing", "low"});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  DecodeOptions options;
  options.decoder = DecoderKind::kFast;
  // Functions with inlined calls make an event of every jump, so no tracelet runs in them.
  options.inlined_frames = false;
  absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(rec.trace, "", options);
  ASSERT_TRUE(result.ok()) << result.status();
  std::printf("blocks %llu, through tracelets %llu\n",
              static_cast<unsigned long long>(result->stats[Stat::kBlocks]),
              static_cast<unsigned long long>(result->stats[Stat::kTraceletBlocks]));
  EXPECT_GT(result->stats[Stat::kTraceletBlocks] * 4, result->stats[Stat::kBlocks]);
  EXPECT_EQ(CompareFastWithLibiptBlock(rec.trace, OnAxis(TimeAxisChoice::kTime)), "");
  EXPECT_EQ(CompareFastWithLibiptBlock(rec.trace, OnAxis(TimeAxisChoice::kInstructions)), "");
}

// With CYC (`--timing high`) quick runs and tracelets are taken too (the cycle cursor is
// looked up once at a run's end): blocks through tracelets on every axis, and the flow
// events (cycles included), counters and FTF still libipt's block decoder's.
TEST(FastBlockDecoderTest, TraceletsUnderCycAreIdentical) {
  Recording rec = Record("ptd_prog_calls", {"--timing", "high"});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  for (TimeAxisChoice axis : {TimeAxisChoice::kTime, TimeAxisChoice::kCycles, TimeAxisChoice::kInstructions}) {
    DecodeOptions options = OnAxis(axis);
    options.decoder = DecoderKind::kFast;
    options.inlined_frames = false;  // as above
    absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(rec.trace, "", options);
    ASSERT_TRUE(result.ok()) << result.status();
    std::printf("axis %d: blocks %llu, through tracelets %llu, cycles %llu\n", static_cast<int>(axis),
                static_cast<unsigned long long>(result->stats[Stat::kBlocks]),
                static_cast<unsigned long long>(result->stats[Stat::kTraceletBlocks]),
                static_cast<unsigned long long>(result->stats[Stat::kCycles]));
    EXPECT_GT(result->stats[Stat::kCycles], 0u) << "the recording has no CYC";
    EXPECT_GT(result->stats[Stat::kTraceletBlocks] * 10, result->stats[Stat::kBlocks]);
    EXPECT_EQ(CompareFastWithLibiptBlock(rec.trace, OnAxis(axis)), "");
  }
}

// Quick runs go on through calls, returns, indirect jumps and jumps out of a function,
// and on the time axis past packets that change the time (HandleQuickRun makes the
// events and clock updates as the block-by-block path would, cycles looked up at each
// one's offset): most calls and returns of a call-heavy program must be taken inside
// quick runs, with and without CYC, on every axis, and the flow events, counters and
// FTF must stay libipt's block decoder's.
TEST(FastBlockDecoderTest, QuickRunsCrossCallsAndReturnsIdentically) {
  for (const char* timing : {"low", "high"}) {
    Recording rec = Record("ptd_prog_calls", {"--timing", timing});
    ASSERT_TRUE(rec.error.empty()) << rec.error;
    for (TimeAxisChoice axis : {TimeAxisChoice::kTime, TimeAxisChoice::kCycles, TimeAxisChoice::kInstructions}) {
      if (std::string(timing) == "low" && axis == TimeAxisChoice::kCycles) continue;  // no CYC
      DecodeOptions options = OnAxis(axis);
      options.decoder = DecoderKind::kFast;
      absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(rec.trace, "", options);
      ASSERT_TRUE(result.ok()) << result.status();
      const uint64_t calls_and_returns = result->stats[Stat::kCalls] + result->stats[Stat::kReturns];
      std::printf("timing %s, axis %d: %llu calls and returns, %llu branches crossed in quick runs\n", timing,
                  static_cast<int>(axis), static_cast<unsigned long long>(calls_and_returns),
                  static_cast<unsigned long long>(result->stats[Stat::kCrossedBranches]));
      EXPECT_GT(calls_and_returns, 1000u);
      EXPECT_GT(result->stats[Stat::kCrossedBranches] * 2, calls_and_returns) << timing << " " << static_cast<int>(axis);
      EXPECT_EQ(CompareFastWithLibiptBlock(rec.trace, OnAxis(axis)), "") << timing << " " << static_cast<int>(axis);
    }
  }
}

}  // namespace
}  // namespace ptd::decoder

namespace ptd::decoder {
namespace {

// Any trace directory (PTD_DIFF_TRACE=DIR): prints the first difference, if any.
TEST(FastBlockDecoderTest, GivenTraceIsIdentical) {
  const char* trace = std::getenv("PTD_DIFF_TRACE");
  if (trace == nullptr) GTEST_SKIP() << "set PTD_DIFF_TRACE to a trace directory to compare the decoders on it";
  EXPECT_EQ(testing::CompareFastWithLibiptBlock(trace, OnAxis(TimeAxisChoice::kInstructions)), "");
  EXPECT_EQ(testing::CompareFastWithLibiptBlock(trace, OnAxis(TimeAxisChoice::kTime)), "");
}

}  // namespace
}  // namespace ptd::decoder
