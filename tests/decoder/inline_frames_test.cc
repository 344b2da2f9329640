// Inlined frames decoded from an emulated recording against ground truth: the emulator's
// executed instructions, each looked up by addr2line -i (an independent reader of the
// same DWARF), its calls and returns from the stack pointer.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "ftf/function_stats.h"
#include "image/elf_reader.h"
#include "image/mapped_file.h"
#include "tests/decoder/recorded_program.h"
#include "tests/testing/addr2line.h"

namespace ptd::decoder {
namespace {

using ::ptd::testing::Addr2lineChains;
using ::ptd::testing::Addr2lineFrame;
using testing::Recording;
using testing::SinksByThread;

const std::string kProgram = absl::StrCat(PTD_BINARY_DIR, "/tests/programs/ptd_prog_inline");

struct Counts {
  uint64_t calls = 0;
  uint64_t instructions = 0;
  bool operator==(const Counts&) const = default;
};
void PrintTo(const Counts& c, std::ostream* os) { *os << c.calls << " calls, " << c.instructions << " instructions"; }

// addr2line's chain of every instruction of the program (ELF addresses) that ran.
std::map<uint64_t, std::vector<Addr2lineFrame>> ProgramChains(const GroundTruthThread& thread, uint64_t bias,
                                                              uint64_t text_start, uint64_t text_end,
                                                              std::string* error) {
  std::set<uint64_t> distinct;
  for (uint64_t ip : thread.ips) {
    if (ip - bias >= text_start && ip - bias < text_end) distinct.insert(ip - bias);
  }
  std::map<uint64_t, std::vector<Addr2lineFrame>> chains =
      Addr2lineChains(kProgram, std::vector<uint64_t>(distinct.begin(), distinct.end()), error);
  if (chains.size() != distinct.size()) return {};
  return chains;
}

// Per inlined function name: calls and instructions (callees included) from the ground
// truth. Each frame of the thread's stack (calls and returns from the stack pointer)
// has its chain of inlined calls; an instruction of the program changes its frame's
// chain to addr2line's, and counts for every inlined call open on the stack.
std::map<std::string, Counts> ExpectedInlined(const GroundTruthThread& thread, uint64_t bias,
                                              const std::map<uint64_t, std::vector<Addr2lineFrame>>& chains) {
  std::map<std::string, Counts> counts;
  std::vector<std::vector<Addr2lineFrame>> stack(1);  // per frame: its open inlined calls
  size_t next_event = 0;
  for (size_t i = 0; i < thread.ips.size(); ++i) {
    for (; next_event < thread.events.size() && thread.event_insn_index[next_event] <= i; ++next_event) {
      const GroundTruthRecord& e = thread.events[next_event];
      if (e.type == GroundTruthTag::kCall) {
        stack.emplace_back();
      } else if (e.type == GroundTruthTag::kReturn || e.type == GroundTruthTag::kUnwind) {
        for (uint64_t n = e.type == GroundTruthTag::kReturn ? 1 : e.count; n > 0 && stack.size() > 1; --n) {
          stack.pop_back();
        }
      }
    }
    // Code outside the program (libraries) changes no chain of the program's frames:
    // it runs in a frame of its own, except for an unwinder's last instructions after it
    // moved the stack pointer, before its jump into the landing pad.
    if (auto it = chains.find(thread.ips[i] - bias); it != chains.end()) {
      std::vector<Addr2lineFrame> chain;
      if (it->second.size() > 1) chain.assign(it->second.begin() + 1, it->second.end());  // without the function
      std::vector<Addr2lineFrame>& open = stack.back();
      size_t same = 0;
      while (same < open.size() && same < chain.size() && open[same] == chain[same]) ++same;
      for (size_t k = same; k < chain.size(); ++k) ++counts[chain[k].name].calls;
      open = chain;
    }
    for (const std::vector<Addr2lineFrame>& frame : stack) {
      for (const Addr2lineFrame& f : frame) ++counts[f.name].instructions;
    }
  }
  return counts;
}

// Per inlined function name: the call sites ("file:line") of its calls that ran.
std::map<std::string, std::set<std::string>> ExpectedCallSites(
    const std::map<uint64_t, std::vector<Addr2lineFrame>>& chains) {
  std::map<std::string, std::set<std::string>> sites;
  for (const auto& [address, chain] : chains) {
    for (size_t i = 1; i < chain.size(); ++i) {
      sites[chain[i].name].insert(absl::StrCat(chain[i].call_file, ":", chain[i].call_line));
    }
  }
  return sites;
}

// The line of prog_inline.cc where each `{name, text}`'s text first appears.
std::map<std::string, int> DefinitionLines(const std::vector<std::pair<std::string, std::string>>& texts) {
  std::map<std::string, int> lines;
  std::ifstream in(absl::StrCat(PTD_SOURCE_DIR, "/tests/programs/prog_inline.cc"));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    for (const auto& [name, text] : texts) {
      if (!lines.count(name) && line.find(text) != std::string::npos) lines[name] = n;
    }
  }
  return lines;
}

class InlineFramesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rec_ = new Recording(testing::Record("ptd_prog_inline", {"--start-at", "main"}));
  }
  static void TearDownTestSuite() {
    delete rec_;
    rec_ = nullptr;
  }

  // The program's load bias and its code's ELF range, from where main ran.
  void ProgramLayout(const GroundTruthThread& thread, uint64_t* bias, uint64_t* text_start, uint64_t* text_end) {
    absl::StatusOr<std::shared_ptr<const image::MappedFile>> file = image::MappedFile::Open(kProgram);
    ASSERT_TRUE(file.ok()) << file.status();
    absl::StatusOr<image::ElfInfo> info = image::ReadElfInfo((*file)->bytes(), kProgram);
    ASSERT_TRUE(info.ok()) << info.status();
    uint64_t main_elf = 0;
    ASSERT_TRUE(image::ForEachElfSymbol((*file)->bytes(), kProgram, [&](const image::ElfSymbol& s) {
                  if (s.name == "main") main_elf = s.value;
                }).ok());
    ASSERT_NE(main_elf, 0u);
    for (const image::ElfSegment& seg : info->segments) {
      if (seg.executable) {
        *text_start = seg.vaddr;
        *text_end = seg.vaddr + seg.file_size;
      }
    }
    // Recording starts at main: its first instruction.
    ASSERT_FALSE(thread.ips.empty());
    *bias = thread.ips[0] - main_elf;
  }

  static Recording* rec_;
};
Recording* InlineFramesTest::rec_ = nullptr;

// Decoded inlined slices per name, and whether every slice nested.
std::map<std::string, Counts> DecodedInlined(const testing::RecordingSink& sink, const std::set<std::string>& names) {
  std::map<std::string, Counts> counts;
  for (const std::string& line : sink.lines()) {
    if (absl::StartsWith(line, "B ")) {
      std::string name = line.substr(2);
      if (names.count(name)) ++counts[name].calls;
    } else if (absl::StartsWith(line, "E ")) {
      size_t at = line.rfind(" i=");
      std::string name = line.substr(2, at - 2);
      if (names.count(name)) counts[name].instructions += std::stoull(line.substr(at + 3));
    }
  }
  return counts;
}

TEST_F(InlineFramesTest, CallsAndInstructionsOfEveryInlinedFunctionEqualGroundTruth) {
  ASSERT_TRUE(rec_->error.empty()) << rec_->error;
  ASSERT_EQ(rec_->truth.size(), 1u);
  const GroundTruthThread& thread = rec_->truth[0];
  uint64_t bias = 0, text_start = 0, text_end = 0;
  ProgramLayout(thread, &bias, &text_start, &text_end);
  if (HasFatalFailure()) return;
  std::string error;
  std::map<uint64_t, std::vector<Addr2lineFrame>> chains = ProgramChains(thread, bias, text_start, text_end, &error);
  ASSERT_FALSE(chains.empty()) << error;
  std::map<std::string, Counts> expected = ExpectedInlined(thread, bias, chains);
  // The program's inlined calls all ran: always_inline two deep, flatten, ordinary -O2
  // inlining, and the one that throws.
  for (const char* name : {"square(int)", "sum_of_squares(int, int)", "add_one", "check_positive(int)"}) {
    EXPECT_TRUE(expected.count(name)) << name;
  }
  std::set<std::string> names;
  for (const auto& [name, c] : expected) names.insert(name);
  std::map<std::string, std::set<std::string>> expected_call_sites = ExpectedCallSites(chains);
  // Where the source defines them (the line with the name's first occurrence followed
  // by '(' after a type).
  std::map<std::string, int> declared_lines = DefinitionLines(
      {{"square(int)", "int square("}, {"sum_of_squares(int, int)", "int sum_of_squares("},
       {"add_one", "int add_one("}, {"check_positive(int)", "void check_positive("},
       {"work(int)", "int work("}, {"flat(int)", "int flat("}, {"guarded(int)", "int guarded("}});

  // One recording, decoded four ways (ctest runs each TEST in a process of its own,
  // which would record again).
  struct Way {
    const char* what;
    DecoderKind kind;
    int jobs;
    bool inlined_frames;
  };
  std::vector<std::string> single_lines;
  for (const Way& way : {Way{"fast decoder", DecoderKind::kFast, 1, true},
                         Way{"libipt block decoder", DecoderKind::kBlock, 1, true},
                         Way{"fast decoder, 4 jobs", DecoderKind::kFast, 4, true},
                         Way{"inlined frames off", DecoderKind::kFast, 1, false}}) {
    SCOPED_TRACE(way.what);
    DecodeOptions options;
    options.decoder = way.kind;
    options.jobs = way.jobs;
    options.piece_bytes = 4096;
    options.inlined_frames = way.inlined_frames;
    ftf::FunctionStatsBuilder function_stats;  // --summary
    options.function_stats = &function_stats;
    SinksByThread sinks;
    absl::StatusOr<DecodeResult> result = DecodeTrace(rec_->trace, options, &sinks);
    ASSERT_TRUE(result.ok()) << result.status();
    const ftf::FunctionStatsSummary summary = function_stats.Finish();
    ASSERT_EQ(sinks.sinks.count(thread.tid), 1u);
    const testing::RecordingSink& sink = *sinks.sinks[thread.tid];
    // Properly nested, in time order, all closed: the exception thrown from
    // check_positive closed its frame too.
    EXPECT_FALSE(sink.unbalanced());
    EXPECT_FALSE(sink.out_of_order());
    EXPECT_EQ(sink.open(), 0u);
    if (!way.inlined_frames) {
      EXPECT_TRUE(DecodedInlined(sink, names).empty());
      continue;
    }
    EXPECT_EQ(DecodedInlined(sink, names), expected);
    // Source locations: each inlined call's call sites are addr2line's; each
    // function's declaration is the line of the source that defines it.
    std::map<std::string, std::set<std::string>> call_sites;  // of the program's inlined functions
    for (const auto& [name, sites] : sink.call_sites()) {
      if (names.count(name)) call_sites[name] = sites;
    }
    EXPECT_EQ(call_sites, expected_call_sites);
    for (const auto& [name, line] : declared_lines) {
      ASSERT_TRUE(sink.declared().count(name)) << name;
      EXPECT_TRUE(absl::EndsWith(sink.declared().at(name), absl::StrCat("prog_inline.cc:", line)))
          << name << " declared at " << sink.declared().at(name);
    }
    // --summary names the same definition beside each function.
    const std::string summary_text = ftf::FormatFunctionStats(summary, summary.functions.size());
    for (const auto& [name, line] : declared_lines) {
      auto f = std::find_if(summary.functions.begin(), summary.functions.end(),
                            [&](const ftf::FunctionStats& s) { return s.name == name; });
      ASSERT_NE(f, summary.functions.end()) << name;
      EXPECT_TRUE(absl::EndsWith(f->source, absl::StrCat("prog_inline.cc:", line))) << name << " at " << f->source;
      EXPECT_NE(summary_text.find(absl::StrCat(name, "  (", f->source, ")")), std::string::npos)
          << name << " has no source in:\n" << summary_text;
    }
    if (way.jobs == 1 && way.kind == DecoderKind::kFast) single_lines = sink.lines();
    if (way.jobs > 1) {
      EXPECT_EQ(sink.lines(), single_lines) << "--jobs 4 differs from --jobs 1";
    }
  }
}

}  // namespace
}  // namespace ptd::decoder
