// The coverage collector (decoder/coverage/collector.h) on a recorded program: the runs
// the fast decoder counts on its multi-block path give the blocks and counts that
// reporting every run as it is decoded gives, the executed instructions libipt's block
// decoder gives, pieces decoded in parallel count what one decoder counts, and the
// collector's size follows the code that ran, not how often.
#include "decoder/coverage/collector.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "decoder/coverage/drcov.h"
#include "decoder/coverage/lcov.h"
#include "decoder/coverage/text.h"
#include "decoder/trace_decoder.h"
#include "image/insn_classifier.h"
#include "image/mapped_file.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using ptd::testing::CommandResult;
using ptd::testing::RunCommand;
using ptd::testing::TempDir;

// A block by what it is, not by its collector's indices.
using BlockKey = std::tuple<std::string, uint64_t, uint32_t>;  // module name, offset, size
struct BlockFigures {
  uint32_t instructions = 0;
  std::string function;
  uint64_t hits = 0;
  bool operator==(const BlockFigures&) const = default;
};

struct Coverage {
  std::string error;
  uint64_t instructions = 0;  // decoded
  uint64_t unresolved_runs = 0;
  std::map<BlockKey, BlockFigures> blocks;
  // Every executed instruction's address in its module and how often it ran: the same
  // whatever the decoder's runs were.
  std::map<std::pair<std::string, uint64_t>, uint64_t> instruction_hits;
  uint64_t jobs = 0;  // threads that decoded
  uint64_t pieces = 0;
  std::string drcov, lcov, text;  // the files `coverage` writes
};

Coverage Collect(const std::string& trace, DecoderKind kind, bool counted_runs, int jobs = 1,
                 uint64_t piece_bytes = 0) {
  Coverage out;
  CoverageCollector collector(counted_runs);
  DecodeOptions options;
  options.decoder = kind;
  options.coverage = &collector;
  options.jobs = jobs;
  options.piece_bytes = piece_bytes;
  absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(trace, "", options);
  if (!result.ok()) {
    out.error = std::string(result.status().message());
    return out;
  }
  out.instructions = result->stats[Stat::kInstructions];
  out.jobs = result->stats[Stat::kJobs];
  out.pieces = result->stats[Stat::kPieces];
  out.unresolved_runs = collector.unresolved_runs();
  out.drcov = CoverageDrcov(collector);
  std::vector<std::string> notes;
  out.lcov = CoverageLcov(collector, &notes);
  out.text = CoverageText(collector);
  for (const CoveredBlock& b : collector.Blocks()) {
    const CoverageModule& module = collector.modules()[b.module];
    out.blocks[{module.name, b.offset, b.size}] = {b.instructions, collector.functions()[b.function], b.hits};
    if (module.module == nullptr || module.module->file == nullptr) continue;
    // The instructions' addresses: decoded from the module's file bytes.
    const absl::Span<const uint8_t> file = module.module->file->bytes();
    uint64_t at = b.offset;
    for (uint32_t i = 0; i < b.instructions && at < file.size(); ++i) {
      out.instruction_hits[{module.name, at}] += b.hits;
      const image::InsnInfo info = image::InsnClassifier::Decode(at, file.subspan(at, 15));
      if (info.size == 0) break;
      at += info.size;
    }
  }
  return out;
}

std::string Record(const TempDir& dir, const std::string& name, const std::vector<std::string>& program_args) {
  const std::string trace = dir.Sub(name);
  std::vector<std::string> argv = {PTD_CLI_PATH, "record", "--emulate=ptrace", "-q", "-o", trace, "--",
                                   absl::StrCat(PTD_BINARY_DIR, "/tests/programs/ptd_prog_coverage")};
  argv.insert(argv.end(), program_args.begin(), program_args.end());
  const CommandResult result = RunCommand(argv);
  return result.exit_code == 0 ? trace : absl::StrCat("record failed: ", result.err);
}

// ptd_prog_coverage calls classify() 8 + argc times: once with no arguments, 11 times as
// often with 90.
constexpr int kExtraArgs = 90;

// Each test runs in a process of its own under ctest: each records only what it reads.
class CoverageCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    short_trace_ = Record(dir_, "short.dir", {});
    ASSERT_TRUE(absl::EndsWith(short_trace_, ".dir")) << short_trace_;
    short_ = Collect(short_trace_, DecoderKind::kFast, true);
    ASSERT_EQ(short_.error, "");
    ASSERT_GT(short_.blocks.size(), 100u);
    ASSERT_EQ(short_.unresolved_runs, 0u);
  }
  TempDir dir_;
  std::string short_trace_;
  Coverage short_;
};

// The same blocks with the same counts in `expected` (counted by one fast decoder) and
// `actual` (`how` it was counted).
void ExpectSameBlocks(const Coverage& expected, const Coverage& actual, const std::string& how) {
  EXPECT_EQ(actual.error, "") << how;
  EXPECT_EQ(actual.instructions, expected.instructions) << how;
  EXPECT_EQ(actual.unresolved_runs, 0u) << how;
  EXPECT_EQ(actual.blocks.size(), expected.blocks.size()) << how;
  size_t differ = 0;
  for (const auto& [key, figures] : expected.blocks) {
    auto it = actual.blocks.find(key);
    if ((it == actual.blocks.end() || !(it->second == figures)) && ++differ <= 5) {
      ADD_FAILURE() << std::get<0>(key) << "+0x" << std::hex << std::get<1>(key) << std::dec << " ("
                    << std::get<2>(key) << " bytes, " << figures.function << "): " << figures.hits << " runs counted, "
                    << (it == actual.blocks.end() ? "absent" : absl::StrCat(it->second.hits, " runs")) << " " << how;
    }
  }
  EXPECT_EQ(differ, 0u) << how;
}

// One recording, three ways to count it: every run reported in order, and pieces cut
// small (--jobs 2, a piece per PSB: their seams checked, the overlap past each stop
// decoded and dropped) give the blocks and counts the fast decoder's counted runs give,
// and the pieces the same drcov, lcov and text files; libipt's decoder the same
// instructions.
TEST_F(CoverageCollectorTest, CountedRunsGiveTheBlocksOfRunsReportedInOrderOrInPiecesAndLibiptsInstructions) {
  ExpectSameBlocks(short_, Collect(short_trace_, DecoderKind::kFast, false), "reported in order");

  const Coverage pieces = Collect(short_trace_, DecoderKind::kFast, true, 2, 1);
  ASSERT_EQ(pieces.error, "");
  EXPECT_EQ(pieces.jobs, 2u);
  EXPECT_GE(pieces.pieces, 3u);  // the trace has 3 PSBs
  ExpectSameBlocks(short_, pieces, "in pieces");
  EXPECT_TRUE(pieces.drcov == short_.drcov);
  EXPECT_EQ(pieces.lcov, short_.lcov);
  EXPECT_EQ(pieces.text, short_.text);
  EXPECT_NE(short_.lcov.find("/prog_coverage.c"), std::string::npos) << short_.lcov.substr(0, 500);

  // libipt ends some runs elsewhere (its own block cache), so its blocks may be cut
  // differently; every instruction's count is the same.
  const Coverage libipt = Collect(short_trace_, DecoderKind::kBlock, false);
  ASSERT_EQ(libipt.error, "");
  EXPECT_EQ(libipt.instructions, short_.instructions);
  EXPECT_EQ(libipt.unresolved_runs, 0u);
  ASSERT_GT(short_.instruction_hits.size(), 1000u);
  EXPECT_EQ(libipt.instruction_hits.size(), short_.instruction_hits.size());
  size_t differ = 0;
  for (const auto& [at, hits] : libipt.instruction_hits) {
    auto it = short_.instruction_hits.find(at);
    const uint64_t fast = it == short_.instruction_hits.end() ? 0 : it->second;
    if (fast != hits && ++differ <= 5) {
      ADD_FAILURE() << at.first << "+0x" << std::hex << at.second << std::dec << ": libipt " << hits << ", fast "
                    << fast;
    }
  }
  EXPECT_EQ(differ, 0u);
}

TEST_F(CoverageCollectorTest, SizeFollowsTheCodeThatRanNotHowOftenItRan) {
  const std::string long_trace = Record(dir_, "long.dir", std::vector<std::string>(kExtraArgs, "x"));
  ASSERT_TRUE(absl::EndsWith(long_trace, ".dir")) << long_trace;
  const Coverage longer = Collect(long_trace, DecoderKind::kFast, true);
  ASSERT_EQ(longer.error, "");
  EXPECT_GT(longer.instructions, short_.instructions);
  // The program's own code: the same blocks, run more often.
  std::map<BlockKey, BlockFigures> short_program, long_program;
  using Program = std::map<BlockKey, BlockFigures>;
  for (auto [coverage, program] : {std::pair<const Coverage*, Program*>{&short_, &short_program},
                                   std::pair<const Coverage*, Program*>{&longer, &long_program}}) {
    for (const auto& [key, figures] : coverage->blocks) {
      if (absl::EndsWith(std::get<0>(key), "/ptd_prog_coverage")) (*program)[key] = figures;
    }
  }
  ASSERT_FALSE(short_program.empty());
  EXPECT_EQ(long_program.size(), short_program.size());
  uint64_t classify_short = 0, classify_long = 0;
  for (const auto& [key, figures] : short_program) {
    auto it = long_program.find(key);
    ASSERT_NE(it, long_program.end()) << "block +0x" << std::hex << std::get<1>(key) << " ran only in the short run";
    EXPECT_GE(it->second.hits, figures.hits);
    // classify's entry: its first block, by offset.
    if (figures.function == "classify" && classify_short == 0) {
      classify_short = figures.hits;
      classify_long = it->second.hits;
    }
  }
  EXPECT_EQ(classify_short, 9u);
  EXPECT_EQ(classify_long, 9u + kExtraArgs);
  // And every module's: the collector holds one entry per block executed, whatever the
  // number of executions. (libc handles the longer argument list, and whatever else
  // differs between two runs' environments, with a few blocks of code more: 1 to 5 of
  // about 2,550 seen; 1 % is far below what one entry per execution would add.)
  uint64_t short_hits = 0, long_hits = 0;
  for (const auto& [key, figures] : short_.blocks) short_hits += figures.hits;
  for (const auto& [key, figures] : longer.blocks) long_hits += figures.hits;
  EXPECT_GT(long_hits, short_hits + 3 * kExtraArgs);
  EXPECT_LE(longer.blocks.size(), short_.blocks.size() + short_.blocks.size() / 100);
}

}  // namespace
}  // namespace ptd::decoder
