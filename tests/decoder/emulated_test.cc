// Real programs recorded on this VM by the emulation backend (ptrace single-step → PT
// packets), decoded by both decoders and compared with the recorder's ground truth
// (the instructions each thread actually executed).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "decoder/trace_decoder.h"
#include "ftf/ftf_check.h"
#include "gtest/gtest.h"
#include "recorder/emulate/ground_truth.h"
#include "tests/decoder/recording_sink.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using ptd::testing::RunCommand;
using ptd::testing::TempDir;

class Sinks : public ThreadSinkFactory {
 public:
  SliceSink* ForThread(int, int, const std::string&, const std::string&) override {
    sinks_.push_back(std::make_unique<testing::RecordingSink>());
    return sinks_.back().get();
  }
  std::vector<std::unique_ptr<testing::RecordingSink>> sinks_;
};

class EmulatedTest : public ::testing::TestWithParam<const char*> {};

TEST_P(EmulatedTest, DecodesExactlyTheGroundTruthInstructionsWithoutErrors) {
  TempDir tmp;
  std::string program = absl::StrCat(PTD_BINARY_DIR, "/tests/programs/", GetParam());
  std::string trace = tmp.Sub("trace");
  std::string truth = tmp.Sub("truth.bin");
  auto r = RunCommand({PTD_CLI_PATH, "record", "--emulate", "--ground-truth", truth, "-o", trace, "--", program});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<std::vector<GroundTruthThread>> threads = LoadGroundTruth(truth);
  ASSERT_TRUE(threads.ok()) << threads.status();
  uint64_t expected = 0;
  for (const GroundTruthThread& t : *threads) expected += t.ips.size() - t.lost;

  DecodeOptions options;
  options.axis = TimeAxisChoice::kInstructions;
  Sinks block_sinks, insn_sinks;
  absl::StatusOr<DecodeResult> block = DecodeTrace(trace, options, &block_sinks);
  ASSERT_TRUE(block.ok()) << block.status();
  options.decoder = DecoderKind::kInsn;
  absl::StatusOr<DecodeResult> insn = DecodeTrace(trace, options, &insn_sinks);
  ASSERT_TRUE(insn.ok()) << insn.status();
  EXPECT_EQ(block->stats.instructions, expected);
  EXPECT_EQ(insn->stats.instructions, expected);
  EXPECT_EQ(block->stats.errors, 0u);
  EXPECT_EQ(insn->stats.errors, 0u);
  EXPECT_EQ(block->stats.threads, threads->size());
  ASSERT_EQ(block_sinks.sinks_.size(), insn_sinks.sinks_.size());
  for (size_t i = 0; i < block_sinks.sinks_.size(); ++i) {
    EXPECT_EQ(block_sinks.sinks_[i]->lines(), insn_sinks.sinks_[i]->lines()) << "thread " << i;
    EXPECT_FALSE(block_sinks.sinks_[i]->unbalanced());
    EXPECT_FALSE(block_sinks.sinks_[i]->out_of_order());
  }

  std::string ftf = tmp.Sub("out.ftf");
  r = RunCommand({PTD_CLI_PATH, "decode", trace, "-o", ftf});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::Status check = ftf::CheckFtfFile(ftf);
  EXPECT_TRUE(check.ok()) << check;
}

INSTANTIATE_TEST_SUITE_P(Programs, EmulatedTest,
                         // C++ (libstdc++ start-up) is millions of single steps: too slow
                         // for CI on a shared 2-core VM.
                         ::testing::Values("ptd_prog_calls", "ptd_prog_vdso", "ptd_prog_longjmp"));

}  // namespace
}  // namespace ptd::decoder
