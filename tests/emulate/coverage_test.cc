// `ptrace-direct coverage` against the ptrace emulator's ground truth and gcov
// (tests/programs/prog_coverage.c: branches never taken, a function never called): the
// drcov file, read here by a reader written from the format's description, holds exactly
// the instructions the program executed, in every module; the text summary names the
// functions that ran and not the one that never did.
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "image/insn_classifier.h"
#include "nlohmann/json.hpp"
#include "recorder/emulate/ground_truth.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct DrcovModule {
  uint64_t base = 0;
  uint64_t end = 0;
  std::string path;
};
struct DrcovBlock {
  uint32_t offset = 0;
  uint16_t size = 0;
  uint16_t module = 0;
};
struct Drcov {
  std::vector<DrcovModule> modules;
  std::vector<DrcovBlock> blocks;
};

// drcov version 2 with a version 2 module table ("id, base, end, entry, path"), binary BB
// table of {u32 start offset, u16 size, u16 module id} little-endian entries.
Drcov ReadDrcov(const std::string& bytes) {
  Drcov out;
  size_t pos = 0;
  const auto line = [&]() {
    const size_t nl = bytes.find('\n', pos);
    EXPECT_NE(nl, std::string::npos) << "no line at byte " << pos;
    std::string l = bytes.substr(pos, nl - pos);
    pos = nl + 1;
    return l;
  };
  EXPECT_EQ(line(), "DRCOV VERSION: 2");
  EXPECT_TRUE(absl::StartsWith(line(), "DRCOV FLAVOR: "));
  const std::string header_line = line();
  absl::string_view header = header_line;
  EXPECT_TRUE(absl::ConsumePrefix(&header, "Module Table: version 2, count ")) << header;
  size_t count = 0;
  EXPECT_TRUE(absl::SimpleAtoi(header, &count)) << header;
  EXPECT_EQ(line(), "Columns: id, base, end, entry, path");
  for (size_t i = 0; i < count; ++i) {
    std::vector<std::string> fields = absl::StrSplit(line(), absl::MaxSplits(", ", 4));
    EXPECT_EQ(fields.size(), 5u);
    if (fields.size() != 5) return out;
    size_t id = 0;
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[0]), &id));
    EXPECT_EQ(id, i);
    DrcovModule m;
    EXPECT_TRUE(absl::SimpleHexAtoi(fields[1], &m.base)) << fields[1];
    EXPECT_TRUE(absl::SimpleHexAtoi(fields[2], &m.end)) << fields[2];
    m.path = fields[4];
    out.modules.push_back(m);
  }
  const std::string bb_line = line();
  absl::string_view bb = bb_line;
  EXPECT_TRUE(absl::ConsumePrefix(&bb, "BB Table: ") && absl::ConsumeSuffix(&bb, " bbs")) << bb;
  size_t blocks = 0;
  EXPECT_TRUE(absl::SimpleAtoi(bb, &blocks)) << bb;
  EXPECT_EQ(bytes.size() - pos, blocks * 8) << "BB table size";
  for (size_t i = 0; i < blocks && pos + 8 <= bytes.size(); ++i, pos += 8) {
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data() + pos);
    DrcovBlock b;
    b.offset = static_cast<uint32_t>(p[0] | p[1] << 8 | p[2] << 16 | uint32_t{p[3]} << 24);
    b.size = static_cast<uint16_t>(p[4] | p[5] << 8);
    b.module = static_cast<uint16_t>(p[6] | p[7] << 8);
    out.blocks.push_back(b);
  }
  return out;
}

class CoverageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    const std::string trace = tmp_->Sub("cov.dir");
    truth_path_ = new std::string(tmp_->Sub("truth.bin"));
    record_ = new CommandResult(RunCli({"record", "-q", "--emulate=ptrace", "--ground-truth", *truth_path_, "-o",
                                        trace, "--", Program("ptd_prog_coverage")}));
    drcov_ = new CommandResult(RunCli({"coverage", "-q", trace, "-o", tmp_->Sub("cov.drcov")}));
    text_ = new CommandResult(RunCli({"coverage", "-q", trace, "-o", tmp_->Sub("cov.txt"), "--format", "text"}));
  }
  static void TearDownTestSuite() {
    delete record_;
    delete drcov_;
    delete text_;
    delete truth_path_;
    delete tmp_;
  }
  void SetUp() override {
    ASSERT_EQ(record_->exit_code, 0) << record_->err;
    ASSERT_EQ(drcov_->exit_code, 0) << drcov_->err;
    ASSERT_EQ(text_->exit_code, 0) << text_->err;
  }
  static TempDir* tmp_;
  static std::string* truth_path_;
  static CommandResult* record_;
  static CommandResult* drcov_;
  static CommandResult* text_;
};
TempDir* CoverageTest::tmp_ = nullptr;
std::string* CoverageTest::truth_path_ = nullptr;
CommandResult* CoverageTest::record_ = nullptr;
CommandResult* CoverageTest::drcov_ = nullptr;
CommandResult* CoverageTest::text_ = nullptr;

// (One test: each test is a process of its own under ctest, and would record again.)
TEST_F(CoverageTest, BlocksHoldExactlyTheExecutedInstructionsAndTextNamesTheFunctionsThatRan) {
  absl::StatusOr<std::string> bytes = ReadFileToString(tmp_->Sub("cov.drcov"));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const Drcov drcov = ReadDrcov(*bytes);
  ASSERT_FALSE(drcov.modules.empty());
  absl::StatusOr<std::vector<GroundTruthThread>> truth = LoadGroundTruth(*truth_path_);
  ASSERT_TRUE(truth.ok()) << truth.status();
  // The truth's instructions as (module, offset from its base).
  std::set<std::pair<size_t, uint64_t>> executed;
  size_t outside = 0;
  for (const GroundTruthThread& thread : *truth) {
    for (uint64_t ip : thread.ips) {
      size_t m = 0;
      while (m < drcov.modules.size() && !(ip >= drcov.modules[m].base && ip < drcov.modules[m].end)) ++m;
      if (m == drcov.modules.size()) {
        ++outside;
        continue;
      }
      executed.insert({m, ip - drcov.modules[m].base});
    }
  }
  EXPECT_EQ(outside, 0u) << "executed instructions in no module of the drcov file";
  // The blocks' instructions, decoded from the modules' files (offset = file offset).
  std::set<std::pair<size_t, uint64_t>> covered;
  std::map<size_t, std::string> files;
  for (const DrcovBlock& b : drcov.blocks) {
    ASSERT_LT(b.module, drcov.modules.size());
    const DrcovModule& module = drcov.modules[b.module];
    ASSERT_EQ(module.path.front(), '/') << module.path << ": a module that is no file";
    if (!files.count(b.module)) {
      absl::StatusOr<std::string> file = ReadFileToString(module.path);
      ASSERT_TRUE(file.ok()) << file.status();
      files[b.module] = *std::move(file);
    }
    const std::string& file = files[b.module];
    uint64_t at = b.offset;
    while (at < uint64_t{b.offset} + b.size) {
      ASSERT_LT(at, file.size());
      const auto* code = reinterpret_cast<const uint8_t*>(file.data() + at);
      const image::InsnInfo insn =
          image::InsnClassifier::Decode(at, absl::MakeConstSpan(code, std::min<size_t>(15, file.size() - at)));
      ASSERT_GT(insn.size, 0) << module.path << "+0x" << std::hex << at;
      covered.insert({b.module, at});
      at += insn.size;
    }
    EXPECT_EQ(at, uint64_t{b.offset} + b.size) << "a block ends inside an instruction";
  }
  EXPECT_GT(executed.size(), 1000u);
  std::vector<std::pair<size_t, uint64_t>> missing, extra;
  std::set_difference(executed.begin(), executed.end(), covered.begin(), covered.end(), std::back_inserter(missing));
  std::set_difference(covered.begin(), covered.end(), executed.begin(), executed.end(), std::back_inserter(extra));
  EXPECT_TRUE(missing.empty()) << missing.size() << " executed instructions in no block, first "
                               << drcov.modules[missing[0].first].path << "+0x" << std::hex << missing[0].second;
  EXPECT_TRUE(extra.empty()) << extra.size() << " instructions in blocks never executed, first "
                             << drcov.modules[extra[0].first].path << "+0x" << std::hex << extra[0].second;

  // The text summary: the functions that ran, not the one that never did.
  absl::StatusOr<std::string> text = ReadFileToString(tmp_->Sub("cov.txt"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("ptd_prog_coverage (base 0x"));
  EXPECT_THAT(*text, HasSubstr("  classify\n"));
  // The program has DWARF: its lines are counted, classify's among them.
  EXPECT_THAT(*text, ::testing::ContainsRegex("ptd_prog_coverage \\(base 0x[0-9a-f]+\\): .* [1-9][0-9]* source lines executed"));
  EXPECT_THAT(*text, ::testing::ContainsRegex(" [1-9][0-9]*  classify\n"));
  EXPECT_THAT(*text, HasSubstr("  main\n"));
  EXPECT_THAT(*text, Not(HasSubstr("never_called")));
  EXPECT_THAT(*text, HasSubstr("libc.so.6"));
}

// The lcov output's line counts against gcov's for one run of the program built with
// --coverage (its counters are written by the very run that is traced), and genhtml
// reading the file.
TEST(CoverageLcovTest, LineCountsMatchGcovOnTheSameRunAndGenhtmlReadsThem) {
#ifndef PTD_COVERAGE_GCOV_OBJECT
  GTEST_SKIP() << "built with a compiler other than GCC: no gcov build of the program to compare with";
#else
  TempDir tmp;
  // gcov's data: the .gcno the compiler wrote, the .gcda the traced run writes here.
  const std::string object = PTD_COVERAGE_GCOV_OBJECT;  // .../prog_coverage.c.o
  const std::string stem = object.substr(0, object.size() - 2);
  const std::string local_stem = tmp.Sub("prog_coverage.c");
  absl::StatusOr<std::string> gcno = ReadFileToString(stem + ".gcno");
  ASSERT_TRUE(gcno.ok()) << gcno.status();
  ASSERT_TRUE(WriteFileAtomic(local_stem + ".gcno", *gcno).ok());
  ::setenv("GCOV_PREFIX", tmp.path().c_str(), 1);
  ::setenv("GCOV_PREFIX_STRIP", "99", 1);  // every directory: the .gcda lands in tmp
  const std::string trace = tmp.Sub("cov.dir");
  const CommandResult record =
      RunCli({"record", "-q", "--emulate=ptrace", "-o", trace, "--", Program("ptd_prog_coverage_gcov")});
  ::unsetenv("GCOV_PREFIX");
  ::unsetenv("GCOV_PREFIX_STRIP");
  ASSERT_EQ(record.exit_code, 0) << record.err;
  const CommandResult gcov = RunCommand({"gcov", "--json-format", "--stdout", "-o", local_stem + ".o", local_stem});
  ASSERT_EQ(gcov.exit_code, 0) << gcov.err;
  std::map<int, uint64_t> expected;  // line -> count
  const nlohmann::json report = nlohmann::json::parse(gcov.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << gcov.out.substr(0, 300);
  for (const auto& file : report["files"]) {
    for (const auto& line : file["lines"]) expected[line["line_number"].get<int>()] = line["count"].get<uint64_t>();
  }
  ASSERT_GE(expected.size(), 8u) << gcov.out.substr(0, 300);

  const std::string info = tmp.Sub("cov.info");
  const CommandResult lcov = RunCli({"coverage", "-q", trace, "-o", info, "--format", "lcov"});
  ASSERT_EQ(lcov.exit_code, 0) << lcov.err;
  absl::StatusOr<std::string> text = ReadFileToString(info);
  ASSERT_TRUE(text.ok()) << text.status();
  // The program's source file record: its DA lines.
  std::map<int, uint64_t> measured;
  bool in_program = false;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::ConsumePrefix(&line, "SF:")) in_program = absl::EndsWith(line, "/prog_coverage.c");
    if (!in_program || !absl::ConsumePrefix(&line, "DA:")) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    int number = 0;
    uint64_t count = 0;
    ASSERT_TRUE(fields.size() == 2 && absl::SimpleAtoi(fields[0], &number) && absl::SimpleAtoi(fields[1], &count))
        << line;
    measured[number] = count;
  }
  size_t both = 0;
  for (const auto& [number, count] : expected) {
    auto it = measured.find(number);
    if (it == measured.end()) continue;
    ++both;
    EXPECT_EQ(it->second, count) << "line " << number;
  }
  EXPECT_GE(both, 8u) << "lines both gcov and the lcov output have";
  EXPECT_EQ(measured[5], 0u) << "never_called ran";
  EXPECT_THAT(*text, HasSubstr("FNDA:9,classify\n"));

  // genhtml (Debian's lcov) renders it; libraries whose sources are not installed are
  // listed without their source (--ignore-errors source).
  if (RunCommand({"genhtml", "--version"}).exit_code != 0) {
    GTEST_SKIP() << "genhtml is not installed (Debian package lcov: scripts/setup): the lcov file is not rendered";
  }
  const CommandResult html = RunCommand({"genhtml", "-q", "--ignore-errors", "source", "-o", tmp.Sub("html"), info});
  EXPECT_EQ(html.exit_code, 0) << html.err;
  EXPECT_TRUE(PathExists(tmp.Sub("html/index.html")));
#endif
}

TEST(CoverageCommandTest, BadInputIsAnErrorNamingIt) {
  TempDir tmp;
  const CommandResult missing = RunCli({"coverage", tmp.Sub("no-such.dir"), "-o", tmp.Sub("x.drcov")});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.err, HasSubstr("no-such.dir"));
  const CommandResult format = RunCli({"coverage", tmp.Sub("no-such.dir"), "-o", tmp.Sub("x.drcov"), "--format", "gcov"});
  EXPECT_NE(format.exit_code, 0);
  EXPECT_THAT(format.err, HasSubstr("--format 'gcov'"));
}

}  // namespace
}  // namespace ptd::testing
