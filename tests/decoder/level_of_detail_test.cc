// Huge-trace options through the library on synthetic walks over libc (TSC time axis,
// 1 ns per instruction, PSB+ every 1 KiB): --min-duration and --max-depth
// (DetailOptions), --window / --window-offset (DecodeWindow) and --max-output-size.
// Every output is checked with the FTF checker and read back slice by slice.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "decoder/trace_decoder.h"
#include "ftf/ftf_check.h"
#include "ftf/ftf_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recorder/emulate/code_walker.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using ::testing::HasSubstr;
using ptd::testing::TempDir;

using ptd::testing::kLibc;

struct Slice {
  uint64_t begin = 0;
  uint64_t end = 0;
  std::string name;
  size_t depth = 0;  // 1: outermost
  uint64_t instructions = 0;
};

// Every Begin/End slice of a (one-thread) FTF file, in End order.
std::vector<Slice> ReadSlices(const std::string& path) {
  std::vector<Slice> slices;
  absl::StatusOr<std::unique_ptr<ftf::FtfReader>> reader = ftf::FtfReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return slices;
  std::vector<Slice> open;
  ftf::FtfRecord record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    if (record.type != ftf::RecordType::kEvent) continue;
    if (record.event.type == ftf::EventType::kDurationBegin) {
      Slice s;
      s.begin = record.event.ts;
      s.name = record.event.name;
      s.depth = open.size() + 1;
      open.push_back(s);
    } else if (record.event.type == ftf::EventType::kDurationEnd && !open.empty()) {
      Slice s = open.back();
      open.pop_back();
      s.end = record.event.ts;
      for (const ftf::ArgValue& a : record.event.args) {
        if (a.name == "instructions") s.instructions = a.bits;
      }
      slices.push_back(s);
    }
  }
  return slices;
}

uint64_t TopLevelInstructions(const std::vector<Slice>& slices) {
  uint64_t n = 0;
  for (const Slice& s : slices) n += s.depth == 1 ? s.instructions : 0;
  return n;
}

uint64_t FileSize(const std::string& path) {
  struct stat st = {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

class LevelOfDetailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PathExists(kLibc)) GTEST_SKIP() << kLibc << " not present";
    CodeWalkerOptions options;
    options.elf_path = kLibc;
    options.max_instructions = 2'000'000;
    options.generator.psb_period = 1024;
    trace_ = tmp_.Sub("walk");
    absl::StatusOr<CodeWalkerStats> stats = WriteWalkerTrace(options, trace_, true, "");
    ASSERT_TRUE(stats.ok()) << stats.status();
  }

  // Decodes into `name`, checks the file, returns the result.
  DecodeResult Decode(const std::string& name, DecodeOptions options) {
    options.jobs = 2;
    absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(trace_, tmp_.Sub(name), options);
    EXPECT_TRUE(result.ok()) << result.status();
    absl::Status check = ftf::CheckFtfFile(tmp_.Sub(name));
    EXPECT_TRUE(check.ok()) << name << ": " << check;
    return result.ok() ? *result : DecodeResult{};
  }

  TempDir tmp_;
  std::string trace_;
};

TEST_F(LevelOfDetailTest, MinDurationDropsShortSlicesAndKeepsTheirInstructionsInParents) {
  Decode("full.ftf", {});
  DecodeOptions coarse;
  coarse.detail.min_duration = 1000;  // 1 us: 1000 instructions here
  DecodeResult result = Decode("coarse.ftf", coarse);
  std::vector<Slice> full = ReadSlices(tmp_.Sub("full.ftf"));
  std::vector<Slice> kept = ReadSlices(tmp_.Sub("coarse.ftf"));
  ASSERT_FALSE(kept.empty());
  EXPECT_GT(full.size(), 5 * kept.size());
  for (const Slice& s : kept) EXPECT_GE(s.end - s.begin, 1000u) << s.name << " at " << s.begin;
  // Exactly the full decode's slices that last 1 us or more (none encloses an instant).
  size_t long_ones = 0;
  for (const Slice& s : full) long_ones += s.end - s.begin >= 1000 ? 1 : 0;
  EXPECT_EQ(kept.size(), long_ones);
  EXPECT_EQ(result.stats[Stat::kDroppedShort], full.size() - kept.size());
  // Every instruction is still inside an outermost slice.
  EXPECT_EQ(TopLevelInstructions(kept), TopLevelInstructions(full));
  EXPECT_THAT(DecodeStatsJson(result), HasSubstr(absl::StrCat("\"dropped_short\": ", result.stats[Stat::kDroppedShort])));
}

TEST_F(LevelOfDetailTest, MaxDepthKeepsTheOuterSlices) {
  Decode("full.ftf", {});
  DecodeOptions shallow;
  shallow.detail.max_depth = 3;
  DecodeResult result = Decode("shallow.ftf", shallow);
  std::vector<Slice> full = ReadSlices(tmp_.Sub("full.ftf"));
  std::vector<Slice> kept = ReadSlices(tmp_.Sub("shallow.ftf"));
  size_t outer = 0;
  for (const Slice& s : full) outer += s.depth <= 3 ? 1 : 0;
  EXPECT_EQ(kept.size(), outer);
  for (const Slice& s : kept) EXPECT_LE(s.depth, 3u);
  EXPECT_EQ(result.stats[Stat::kDroppedDeep], full.size() - outer);
  EXPECT_GT(result.stats[Stat::kDroppedDeep], 0u);
}

TEST_F(LevelOfDetailTest, WindowDecodesOnlyThePsbIntervalsAroundIt) {
  DecodeResult full_result = Decode("full.ftf", {});
  std::vector<Slice> full = ReadSlices(tmp_.Sub("full.ftf"));
  DecodeOptions options;
  options.window.kind = DecodeWindow::Kind::kTime;
  options.window.begin = 1'000'000;  // ns = instructions on the walk's clock
  options.window.end = 1'100'000;
  DecodeResult result = Decode("window.ftf", options);
  std::vector<Slice> window = ReadSlices(tmp_.Sub("window.ftf"));
  ASSERT_FALSE(window.empty());
  // About the window's 100,000 instructions (plus up to a PSB interval on each side),
  // not the trace's 2 M.
  EXPECT_GE(result.stats[Stat::kInstructions], 100'000u);
  EXPECT_LT(result.stats[Stat::kInstructions], 200'000u);
  EXPECT_LT(result.stats[Stat::kBytes], full_result.stats[Stat::kBytes] / 5);
  uint64_t first = UINT64_MAX, last = 0;
  for (const Slice& s : window) {
    first = std::min(first, s.begin);
    last = std::max(last, s.end);
  }
  EXPECT_LE(first, 1'000'000u);
  EXPECT_GE(last, 1'100'000u);
  EXPECT_THAT(absl::StrJoin(result.notes, "\n"), HasSubstr("window: "));
  // The leaves inside the window are the full decode's (names and begin times).
  std::vector<std::pair<uint64_t, std::string>> expected, got;
  for (const Slice& s : full) {
    if (s.begin >= 1'010'000 && s.end < 1'090'000) expected.emplace_back(s.begin, s.name);
  }
  for (const Slice& s : window) {
    if (s.begin >= 1'010'000 && s.end < 1'090'000) got.emplace_back(s.begin, s.name);
  }
  std::sort(expected.begin(), expected.end());
  std::sort(got.begin(), got.end());
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(got, expected);
}

TEST_F(LevelOfDetailTest, WindowByOffsetAndWindowsOutsideTheTrace) {
  DecodeOptions by_offset;
  by_offset.window.kind = DecodeWindow::Kind::kOffset;
  by_offset.window.begin = 100'000;
  by_offset.window.end = 110'000;
  DecodeResult result = Decode("offset.ftf", by_offset);
  EXPECT_GT(result.stats[Stat::kInstructions], 0u);
  EXPECT_LE(result.stats[Stat::kBytes], 10'000u + 2 * 1024 + 256);

  DecodeOptions late;
  late.window.kind = DecodeWindow::Kind::kTime;
  late.window.begin = 50'000'000;
  late.window.end = 60'000'000;
  absl::StatusOr<DecodeResult> outside = DecodeTraceToFtf(trace_, tmp_.Sub("late.ftf"), late);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outside.status().message(), HasSubstr("lies outside the trace"));

  DecodeOptions past_end;
  past_end.window.kind = DecodeWindow::Kind::kOffset;
  past_end.window.begin = 1'000'000'000;
  absl::StatusOr<DecodeResult> nothing = DecodeTraceToFtf(trace_, tmp_.Sub("nothing.ftf"), past_end);
  ASSERT_FALSE(nothing.ok());
  EXPECT_THAT(nothing.status().message(), HasSubstr("holds no PT data"));
}

TEST_F(LevelOfDetailTest, MaxOutputSizeFitsAndKeepsFullDetailAtTheEnd) {
  Decode("full.ftf", {});
  const uint64_t full_size = FileSize(tmp_.Sub("full.ftf"));
  const uint64_t limit = full_size / 4;
  DecodeOptions options;
  options.max_output_bytes = limit;
  DecodeResult result = Decode("fit.ftf", options);
  EXPECT_LE(FileSize(tmp_.Sub("fit.ftf")), limit);
  EXPECT_GT(FileSize(tmp_.Sub("fit.ftf")), limit / 4);  // not needlessly coarse
  const std::string notes = absl::StrJoin(result.notes, "\n");
  EXPECT_THAT(notes, HasSubstr("max-output-size"));
  EXPECT_THAT(notes, HasSubstr("every slice from there on"));
  EXPECT_GT(result.stats[Stat::kDroppedShort], 0u);
  // Every instruction still in an outermost slice; the newest slices all there.
  std::vector<Slice> full = ReadSlices(tmp_.Sub("full.ftf"));
  std::vector<Slice> fit = ReadSlices(tmp_.Sub("fit.ftf"));
  EXPECT_EQ(TopLevelInstructions(fit), TopLevelInstructions(full));
  uint64_t last_begin = 0;
  for (const Slice& s : full) last_begin = std::max(last_begin, s.begin);
  auto count_from = [](const std::vector<Slice>& slices, uint64_t t) {
    return std::count_if(slices.begin(), slices.end(), [t](const Slice& s) { return s.begin >= t; });
  };
  EXPECT_EQ(count_from(fit, last_begin), count_from(full, last_begin));

  DecodeOptions roomy;
  roomy.max_output_bytes = full_size * 2;
  DecodeResult whole = Decode("roomy.ftf", roomy);
  EXPECT_EQ(whole.stats[Stat::kDroppedShort], 0u);
  EXPECT_THAT(absl::StrJoin(whole.notes, "\n"), HasSubstr("full detail"));
  EXPECT_EQ(FileSize(tmp_.Sub("roomy.ftf")), full_size);
}

TEST_F(LevelOfDetailTest, MaxOutputSizeFitsGzipOutputWithoutBeingNeedlesslyCoarse) {
  Decode("full.ftf.gz", {});
  const uint64_t limit = FileSize(tmp_.Sub("full.ftf.gz")) / 4;
  DecodeOptions options;
  options.max_output_bytes = limit;
  DecodeResult result = Decode("fit.ftf.gz", options);
  const uint64_t written = FileSize(tmp_.Sub("fit.ftf.gz"));
  EXPECT_LE(written, limit);
  // Planned on uncompressed bytes, then once more with what gzip saved.
  EXPECT_GT(written, limit / 3) << absl::StrJoin(result.notes, "\n");
}

}  // namespace
}  // namespace ptd::decoder
