// Call stacks of real programs recorded on this VM by the emulation backend, compared
// slice by slice with what the recorder's ground truth (instructions + RSP-derived
// call/return/unwind events) says the model must write (tests/decoder/ground_truth_slices.h
// and docs/decoder.md, "Comparing with ground truth"). Each program is recorded once per
// suite: an emulated recording costs seconds of single-stepping.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/trace_meta.h"
#include "decoder/flow/insn_classifier.h"
#include "decoder/trace_decoder.h"
#include "gtest/gtest.h"
#include "image/module_cache.h"
#include "image/section_cache.h"
#include "image/timed_image.h"
#include "recorder/emulate/ground_truth.h"
#include "sideband/sideband_set.h"
#include "tests/decoder/decoder_diff.h"
#include "tests/decoder/ground_truth_slices.h"
#include "tests/decoder/recorded_program.h"
#include "tests/decoder/recording_sink.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using testing::Record;
using testing::Recording;
using testing::SinksByThread;

// Overflows the recorder injected: one LOST record each (none is injected where nothing
// would be lost).
uint64_t LostRecords(const Recording& rec) {
  uint64_t n = 0;
  for (const GroundTruthThread& thread : rec.truth) {
    for (const GroundTruthRecord& e : thread.events) n += e.type == GroundTruthTag::kLost;
  }
  return n;
}

// Decodes `rec` and compares every thread's slices with its ground truth. `snapshot`:
// the trace holds only the newest instructions of each thread.
void ExpectMatchesGroundTruth(const Recording& rec, DecoderKind kind = DecoderKind::kBlock,
                              bool snapshot = false) {
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  DecodeOptions options;
  options.decoder = kind;
  // Function slices only (the expectation knows no DWARF): inline_frames_test.cc checks
  // inlined ones.
  options.inlined_frames = false;
  SinksByThread sinks;
  absl::StatusOr<DecodeResult> result = DecodeTrace(rec.trace, options, &sinks);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stats[Stat::kErrors], 0u);
  // Every injected overflow is seen, once, and nothing else is taken for one.
  EXPECT_EQ(result->stats[Stat::kOverflows], LostRecords(rec));

  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(rec.trace);
  ASSERT_TRUE(meta.ok()) << meta.status();
  absl::StatusOr<Sideband> sideband = LoadSideband(rec.trace, *meta);
  ASSERT_TRUE(sideband.ok()) << sideband.status();
  image::SectionCache sections;
  image::ModuleCache modules;
  modules.SetInlinedFrames(false);
  uint64_t expected_instructions = 0;
  for (const GroundTruthThread& thread : rec.truth) {
    SCOPED_TRACE(absl::StrCat("thread ", thread.tid));
    auto it = sinks.sinks.find(thread.tid);
    ASSERT_NE(it, sinks.sinks.end()) << "no slices decoded for the thread";
    const testing::RecordingSink& sink = *it->second;
    EXPECT_FALSE(sink.unbalanced());
    EXPECT_FALSE(sink.out_of_order());
    std::unique_ptr<image::TimedProcessImage> image =
        image::MakeTraceProcessImage(&sections, &modules, rec.trace, *meta, &*sideband, thread.pid);
    image->ApplyAll();
    ImageFunctionResolver resolver(image->image());
    InsnClassifier classifier(image->image());
    size_t first = 0;
    if (snapshot) {
      uint64_t decoded = sink.TopLevelInstructions();
      ASSERT_LE(decoded, thread.ips.size());
      first = thread.ips.size() - decoded;
      EXPECT_GT(first, 0u) << "the snapshot holds the whole run: make it smaller";
    }
    expected_instructions += thread.ips.size() - first;
    std::vector<size_t> switched_out;
    if (meta->per == "cpu") switched_out = testing::SwitchedOut(thread, sideband->schedule);
    std::vector<std::string> expected =
        testing::ExpectedSlices(thread, &resolver, &classifier, image->image(), first, {}, switched_out);
    std::string difference = testing::FirstDifference(expected, sink.lines());
    if (!difference.empty() && getenv("PTD_GT_DUMP") != nullptr) {
      // Both sequences in full, for a closer look.
      FILE* out = fopen(getenv("PTD_GT_DUMP"), "w");
      for (const std::string& l : expected) fprintf(out, "%s\n", l.c_str());
      fprintf(out, "=====\n");
      for (const std::string& l : sink.lines()) fprintf(out, "%s\n", l.c_str());
      fclose(out);
    }
    EXPECT_TRUE(difference.empty()) << difference;
  }
  EXPECT_EQ(result->stats[Stat::kInstructions], expected_instructions);
  EXPECT_EQ(result->stats[Stat::kThreads], rec.truth.size());
  // Every recording is also decoded by the fast decoder: the same output, exactly.
  if (kind == DecoderKind::kBlock) {
    EXPECT_EQ(testing::CompareFastWithLibiptBlock(rec.trace), "");
  }
}

#define PTD_RECORDED_SUITE(Suite, program, ...)                                 \
  class Suite : public ::testing::Test {                                        \
   protected:                                                                   \
    static void SetUpTestSuite() { rec_ = new Recording(Record(program, {__VA_ARGS__})); } \
    static void TearDownTestSuite() {                                           \
      delete rec_;                                                              \
      rec_ = nullptr;                                                           \
    }                                                                           \
    static Recording* rec_;                                                     \
  };                                                                            \
  Recording* Suite::rec_ = nullptr

PTD_RECORDED_SUITE(GroundTruthCalls, "ptd_prog_calls");
// ctest runs every TEST in its own process, so a suite records once per TEST: both
// decoders are checked in one TEST.
TEST_F(GroundTruthCalls, BothDecodersMatch) {
  ExpectMatchesGroundTruth(*rec_);
  ExpectMatchesGroundTruth(*rec_, DecoderKind::kInsn);
}

PTD_RECORDED_SUITE(GroundTruthVdso, "ptd_prog_vdso");
TEST_F(GroundTruthVdso, BothDecodersMatch) {
  ExpectMatchesGroundTruth(*rec_);
  ExpectMatchesGroundTruth(*rec_, DecoderKind::kInsn);
}

PTD_RECORDED_SUITE(GroundTruthLongjmp, "ptd_prog_longjmp");
TEST_F(GroundTruthLongjmp, BothDecodersMatch) {
  ExpectMatchesGroundTruth(*rec_);
  ExpectMatchesGroundTruth(*rec_, DecoderKind::kInsn);
}

// Started at main: libstdc++'s start-up alone is millions of single steps. The trace
// then starts mid-stack (main's caller is inferred when main returns).
PTD_RECORDED_SUITE(GroundTruthCxxExceptions, "ptd_prog_cxx_exceptions", "--start-at", "main");
TEST_F(GroundTruthCxxExceptions, Matches) { ExpectMatchesGroundTruth(*rec_); }

PTD_RECORDED_SUITE(GroundTruthOcaml, "ptd_prog_ocaml");
TEST_F(GroundTruthOcaml, Matches) { ExpectMatchesGroundTruth(*rec_); }

PTD_RECORDED_SUITE(GroundTruthDlopen, "ptd_prog_dlopen");
TEST_F(GroundTruthDlopen, Matches) { ExpectMatchesGroundTruth(*rec_); }

PTD_RECORDED_SUITE(GroundTruthThreads, "ptd_prog_threads");
TEST_F(GroundTruthThreads, PerThreadMatches) { ExpectMatchesGroundTruth(*rec_); }

PTD_RECORDED_SUITE(GroundTruthThreadsPerCpu, "ptd_prog_threads", "--virtual-cpus", "2");
// Per-CPU streams are split into threads by the schedule: every thread of the ground
// truth gets its own track, and the per-thread instruction counts add up exactly.
TEST_F(GroundTruthThreadsPerCpu, MatchesAndEveryInstructionIsCounted) {
  ASSERT_TRUE(rec_->error.empty()) << rec_->error;
  SinksByThread sinks;
  absl::StatusOr<DecodeResult> result = DecodeTrace(rec_->trace, DecodeOptions(), &sinks);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stats[Stat::kErrors], 0u);
  uint64_t expected = 0;
  for (const GroundTruthThread& thread : rec_->truth) {
    expected += thread.ips.size();
    EXPECT_TRUE(sinks.sinks.count(thread.tid)) << "no track for thread " << thread.tid;
  }
  EXPECT_EQ(result->stats[Stat::kInstructions], expected);
  EXPECT_EQ(result->stats[Stat::kThreads], rec_->truth.size());

  // Slice by slice, across hundreds of virtual-CPU switches: each enabled stretch goes to
  // the thread the schedule runs at its TIP.PGE, which the emulator (like hardware) puts
  // strictly after the switch records, themselves strictly after the old thread's TIP.PGD.
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(rec_->trace);
  ASSERT_TRUE(meta.ok()) << meta.status();
  absl::StatusOr<Sideband> sideband = LoadSideband(rec_->trace, *meta);
  ASSERT_TRUE(sideband.ok()) << sideband.status();
  size_t switches = 0;
  for (const GroundTruthThread& thread : rec_->truth) switches += testing::SwitchedOut(thread, sideband->schedule).size();
  EXPECT_GE(switches, 100u) << "the threads hardly share a virtual CPU: the test proves little";
  ExpectMatchesGroundTruth(*rec_);
}

// Injected overflows (OVF, then FUP where the trace resumes): each becomes an instant
// that closes every slice, and a new segment starts where the thread resumes, exactly
// where the truth's LOST records say. ~400 KB of trace (ld.so included, on the wall axis,
// whose timing packets the size counts): ~40 overflows.
PTD_RECORDED_SUITE(GroundTruthCallsOverflow, "ptd_prog_calls", "--emulate-overflow-every", "6144", "--time=wall");
TEST_F(GroundTruthCallsOverflow, Matches) {
  ASSERT_TRUE(rec_->error.empty()) << rec_->error;
  EXPECT_GE(LostRecords(*rec_), 3u);
  ExpectMatchesGroundTruth(*rec_);
  ExpectMatchesGroundTruth(*rec_, DecoderKind::kInsn);
}

// Three threads, each with its own stream and its own overflows. Every 2 KiB: a worker's
// stream is only 4.6 KB on some machines (an Intel Xeon VM; glibc picks its string
// functions by CPU), where 8 KiB left both workers without one (wall axis, as above).
PTD_RECORDED_SUITE(GroundTruthThreadsOverflow, "ptd_prog_threads", "--emulate-overflow-every", "2048", "--time=wall");
TEST_F(GroundTruthThreadsOverflow, Matches) {
  ASSERT_TRUE(rec_->error.empty()) << rec_->error;
  size_t threads_with_loss = 0;
  for (const GroundTruthThread& thread : rec_->truth) threads_with_loss += thread.lost > 0;
  EXPECT_GE(threads_with_loss, 2u);
  ExpectMatchesGroundTruth(*rec_);
}

// The newest 4 KiB of the trace: decoding starts at a PSB in the middle of the run. TSC
// only (--timing low): with MTC/CYC the bytes, and so where the snapshot starts, vary
// from run to run, and in 2 of 12 runs under load the start fell where this oracle and
// the decoder disagree about the inferred parents (not yet understood; see docs/decoder.md).
PTD_RECORDED_SUITE(GroundTruthSnapshot, "ptd_prog_calls", "--snapshot", "--snapshot-size", "4K", "--timing", "low");
TEST_F(GroundTruthSnapshot, MidStackStartMatches) { ExpectMatchesGroundTruth(*rec_, DecoderKind::kBlock, true); }

}  // namespace
}  // namespace ptd::decoder
