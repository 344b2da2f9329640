#include "tests/decoder/decoder_diff.h"

#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "image/section_cache.h"
#include "tests/decoder/flow_log.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder::testing {
namespace {

constexpr char kNoFlowEvents[] = "no flow events at all";

bool SameEvent(const FlowEvent& a, const FlowEvent& b) {
  return a.kind == b.kind && a.target_known == b.target_known && a.ip == b.ip && a.target == b.target &&
         a.fallthrough == b.fallthrough && a.instructions == b.instructions && a.cycles == b.cycles &&
         a.time == b.time && a.offset == b.offset && a.enable_time == b.enable_time &&
         std::strcmp(a.message, b.message) == 0;
}

std::string Describe(const FlowEvent& e) {
  return absl::StrFormat("kind %d ip 0x%x target 0x%x instructions %d time %d offset %d %s", static_cast<int>(e.kind),
                         e.ip, e.target, e.instructions, e.time, e.offset, e.message);
}

struct Decoded {
  FlowLog log;
  DecodeResult result;
  std::string ftf;
};

absl::Status Decode(const std::string& trace, DecodeOptions options, DecoderKind kind, const std::string& output,
                    Decoded* out) {
  options.decoder = kind;
  options.flow_observer = &out->log;
  absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(trace, output, options);
  if (!result.ok()) return result.status();
  out->result = *std::move(result);
  absl::StatusOr<std::string> ftf = ReadFileToString(output);
  if (!ftf.ok()) return ftf.status();
  out->ftf = *std::move(ftf);
  return absl::OkStatus();
}

struct Block {
  uint64_t ip, end_ip;
  uint32_t count;
};

class BlockLog : public BlockObserver {
 public:
  void OnBlock(uint64_t ip, uint64_t end_ip, uint32_t count) override { blocks.push_back({ip, end_ip, count}); }
  std::vector<Block> blocks;
};

// The blocks one decoder ran, and its instruction count.
struct BlockRun {
  std::vector<Block> blocks;
  uint64_t instructions = 0;
};

absl::StatusOr<BlockRun> RunBlocks(const std::string& trace, DecodeOptions options, DecoderKind kind) {
  BlockLog log;
  options.decoder = kind;
  options.block_observer = &log;
  absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(trace, "", options);
  if (!result.ok()) return result.status();
  return BlockRun{std::move(log.blocks), result->stats[Stat::kInstructions]};
}

}  // namespace

std::string FirstFlowDifference(const std::vector<FlowEvent>& a, const std::vector<FlowEvent>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (!SameEvent(a[i], b[i])) {
      return absl::StrCat("flow event ", i, " differs: libipt-block ", Describe(a[i]), "; fast ", Describe(b[i]),
                          i > 0 ? absl::StrCat("; the event before: ", Describe(a[i - 1])) : "");
    }
  }
  if (a.size() != b.size()) {
    const FlowEvent& extra = a.size() > b.size() ? a[b.size()] : b[a.size()];
    return absl::StrCat("libipt-block gave ", a.size(), " flow events, fast ", b.size(), "; the first extra: ",
                        Describe(extra));
  }
  return "";
}

std::string CompareFastWithLibiptBlock(const std::string& trace, DecodeOptions options) {
  ptd::testing::TempDir tmp;
  Decoded block, fast;
  if (absl::Status s = Decode(trace, options, DecoderKind::kBlock, tmp.Sub("block.ftf"), &block); !s.ok()) {
    return absl::StrCat("libipt-block: ", s.ToString());
  }
  if (absl::Status s = Decode(trace, options, DecoderKind::kFast, tmp.Sub("fast.ftf"), &fast); !s.ok()) {
    return absl::StrCat("fast: ", s.ToString());
  }
  const std::vector<FlowEvent>& a = block.log.events;
  if (std::string difference = FirstFlowDifference(a, fast.log.events); !difference.empty()) return difference;
  // Every counter but `blocks` (libipt splits a few first-visit blocks), `undecodable`,
  // the fast decoder's own (`tracelet_blocks`, `quick_run_crossed_branches`,
  // `fast_block_summaries_*`) and the CPU times.
  const Stats& x = block.result.stats;
  const Stats& y = fast.result.stats;
  for (size_t i = 0; i < kStatCount; ++i) {
    const Stat stat = static_cast<Stat>(i);
    if (stat == Stat::kBlocks || stat == Stat::kUndecodable || stat == Stat::kTraceletBlocks ||
        stat == Stat::kCrossedBranches || stat == Stat::kFastRunsShared || stat == Stat::kFastRunsDecoded || IsCpuTime(stat) ||
        x[stat] == y[stat]) {
      continue;
    }
    return absl::StrFormat("stats differ: %s %d (libipt-block) / %d (fast)", Stats::Key(stat), x[stat], y[stat]);
  }
  if (block.ftf != fast.ftf) return "the FTF files differ (the flow events do not)";
  if (a.empty()) return absl::StrCat(kNoFlowEvents, ": the comparison proves nothing");
  return "";
}

std::string CompareFastWithLibiptBlockOnCorruptTrace(const std::string& trace, DecodeOptions options,
                                                     const absl::flat_hash_set<uint64_t>& executed,
                                                     std::string* excuse) {
  excuse->clear();
  std::string difference = CompareFastWithLibiptBlock(trace, options);
  if (difference.empty()) return "";
  if (absl::StartsWith(difference, kNoFlowEvents)) {
    // Identical (both decoded nothing: a mutation in the stream's first PSB+ can leave a
    // stream no decoder syncs to), but no evidence either.
    *excuse = "the mutation left no flow events to compare";
    return "";
  }
  absl::StatusOr<BlockRun> a = RunBlocks(trace, options, DecoderKind::kBlock);
  absl::StatusOr<BlockRun> b = RunBlocks(trace, options, DecoderKind::kFast);
  if (!a.ok() || !b.ok()) return absl::StrCat(difference, "; blocks: ", (a.ok() ? b : a).status().ToString());
  // Block boundaries differ between the two (libipt splits some runs; both give the
  // same events): what counts is whether either walked bytes that never ran.
  auto walked_non_code = [&](const std::vector<Block>& blocks) {
    for (const Block& block : blocks) {
      if (!executed.contains(block.ip) || !executed.contains(block.end_ip)) return true;
    }
    return false;
  };
  if (walked_non_code(a->blocks) || walked_non_code(b->blocks)) {
    *excuse = "a decoder walked bytes the program never executed";
    return "";
  }
  // libipt's own two decoders read some corrupt streams differently (its block decoder's
  // cached conditional branch keeps the branch in a block whose TNT query failed, and
  // runs it again): no single reading to match there.
  options.decoder = DecoderKind::kInsn;
  absl::StatusOr<DecodeResult> by_insn = DecodeTraceToFtf(trace, "", options);
  if (by_insn.ok() && a->instructions != by_insn->stats[Stat::kInstructions]) {
    *excuse = absl::StrFormat("libipt-block and libipt-insn disagree (%d and %d instructions)", a->instructions,
                              by_insn->stats[Stat::kInstructions]);
    return "";
  }
  return absl::StrCat(difference, "; every block both decoders ran is on executed code, and libipt's decoders agree");
}

DecodedStream DecodeOverMapping(DecoderKind kind, const image::Mapping& mapping, const uint8_t* padded, size_t size,
                                image::ModuleCache* modules, SectionBlockCache* shared) {
  image::SectionCache sections;
  image::ProcessImage image(&sections, modules, "test");
  EXPECT_TRUE(image.AddMapping(mapping).ok());
  FlowLog log;
  PtDecodeConfig config;
  config.kind = kind;
  config.section_blocks = shared;
  std::unique_ptr<FlowDecoder> decoder = MakeFlowDecoder(config, &image, &log);
  absl::Status status = decoder->DecodeChunk(padded, size, 0);
  EXPECT_TRUE(status.ok()) << status;
  return {std::move(log.events), decoder->instructions(), decoder->stats()};
}

namespace {

// One line per event (kind, IP, target, instructions, offset, message): failure output.
std::string DescribeFlow(const std::vector<FlowEvent>& events) {
  std::string out;
  for (const FlowEvent& e : events) {
    out += absl::StrFormat("kind %d ip 0x%x target 0x%x instructions %d offset %d %s\n", static_cast<int>(e.kind), e.ip,
                           e.target, e.instructions, e.offset, e.message);
  }
  return out;
}

}  // namespace

BothDecoders DecodeProgramBothWays(const std::string& dir, const std::vector<uint8_t>& code, uint64_t base,
                                   void (*write)(PacketWriter*)) {
  BothDecoders both;
  PacketWriter stream(4096);
  write(&stream);
  const std::string code_path = dir + "/code.bin";
  absl::Status written = WriteFileAtomic(code_path, std::string(code.begin(), code.end()));
  if (!written.ok()) {
    both.difference = std::string(written.message());
    return both;
  }
  image::ModuleCache modules;
  image::Mapping mapping;
  mapping.path = code_path;
  mapping.name = "code";
  mapping.vaddr = base;
  mapping.memory_dump = true;
  both.block = DecodeOverMapping(DecoderKind::kBlock, mapping, stream.data(), stream.size(), &modules);
  both.fast = DecodeOverMapping(DecoderKind::kFast, mapping, stream.data(), stream.size(), &modules);
  both.difference = FirstFlowDifference(both.block.events, both.fast.events);
  if (!both.difference.empty()) {
    absl::StrAppend(&both.difference, "\nlibipt-block:\n", DescribeFlow(both.block.events), "fast:\n",
                    DescribeFlow(both.fast.events));
  }
  return both;
}

FlowCounts CountFlow(const DecodedStream& decoded) {
  FlowCounts counts;
  counts.instructions = decoded.instructions;
  for (const FlowEvent& e : decoded.events) {
    counts.calls += e.kind == FlowKind::kCall ? 1 : 0;
    counts.returns += e.kind == FlowKind::kReturn ? 1 : 0;
    counts.syscalls += e.kind == FlowKind::kSyscall ? 1 : 0;
    counts.errors += e.kind == FlowKind::kError ? 1 : 0;
  }
  return counts;
}

void ExpectBothGave(const BothDecoders& both, const FlowCounts& expected) {
  EXPECT_EQ(both.difference, "");
  EXPECT_EQ(CountFlow(both.fast), expected) << "fast";
  EXPECT_EQ(CountFlow(both.block), expected) << "libipt-block";
}

void PrintTo(const FlowCounts& counts, std::ostream* os) {
  *os << absl::StrFormat("{%d instructions, %d calls, %d returns, %d syscalls, %d errors}", counts.instructions,
                         counts.calls, counts.returns, counts.syscalls, counts.errors);
}

}  // namespace ptd::decoder::testing
