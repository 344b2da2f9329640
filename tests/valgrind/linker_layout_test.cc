// Names come from the symbols placed through the program headers, whatever the linker's
// segment layout: the same program linked by bfd, gold, lld and mold, as an executable, a
// PIE, an executable calling into a shared library, and a stripped PIE whose symbols are
// in its debug file, recorded under Valgrind. Every function is named, and called as
// often as callgrind counts.
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

// "exe", "pie", "shared", "pie_stripped": how tests/programs built ptd_prog_linked_<linker>_<kind>.
using LinkedProgram = std::tuple<std::string, std::string>;

class LinkerLayoutTest : public ::testing::TestWithParam<LinkedProgram> {
 protected:
  void SetUp() override {
    std::string why;
    if (!ValgrindAvailable(&why)) GTEST_SKIP() << why;
    const auto& [linker, kind] = GetParam();
    program_ = Program("ptd_prog_linked_" + linker + "_" + kind);
    if (!PathExists(program_)) GTEST_SKIP() << "ld." << linker << " not installed: " << program_ << " not built";
  }

  std::string program_;
  TempDir tmp_;
};

// True when `name` is "FILE+0xOFFSET" for an offset in the .text of tests/programs/FILE:
// code of the program's own functions that no symbol named (PLT stubs are not in .text).
bool IsUnnamedText(const std::string& name) {
  const size_t plus = name.rfind("+0x");
  if (plus == std::string::npos) return false;
  uint64_t offset = 0;
  if (!absl::SimpleHexAtoi(name.substr(plus + 3), &offset)) return false;
  const std::string file = Program(name.substr(0, plus));
  if (!PathExists(file)) return false;
  // "  [16] .text   PROGBITS   0000000000001060 001060 000185 00  AX  0   0 16"
  const CommandResult sections = RunCommand({"readelf", "-SW", file});
  for (absl::string_view line : absl::StrSplit(sections.out, '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line.substr(std::min(line.find(']'), line.size())), ' ', absl::SkipEmpty());
    uint64_t start = 0, size = 0;
    if (fields.size() >= 6 && fields[1] == ".text" && absl::SimpleHexAtoi(fields[4], &start) &&
        absl::SimpleHexAtoi(fields[5], &size)) {
      return offset >= start && offset < start + size;
    }
  }
  return false;
}

TEST_P(LinkerLayoutTest, EveryFunctionIsNamedAndCalledAsOftenAsCallgrindCounts) {
  RecordOptions options = EmulatedRecordOptions({program_}, tmp_.path(), "valgrind");
  DecodedRecording rec = RecordAndDecodeForTest(RecordValgrind, options);
  ASSERT_FALSE(rec.dir.empty());
  EXPECT_EQ(rec.decoded.errors, 0u);
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind = CallgrindCalls(options.command, tmp_.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  for (const char* fn : {"main", "run_linked_functions", "fib", "twice", "thrice", "tail_caller", "local_step"}) {
    EXPECT_GT(CallsOf(rec.decoded.calls, fn), 0u) << fn;
    EXPECT_EQ(CallsOf(rec.decoded.calls, fn), CallsOf(*callgrind, fn)) << fn;
  }
  for (const auto& [name, count] : rec.decoded.calls) {
    EXPECT_FALSE(IsUnnamedText(name)) << name << " x" << count;
  }
}

INSTANTIATE_TEST_SUITE_P(Linkers, LinkerLayoutTest,
                         ::testing::Combine(::testing::Values("bfd", "gold", "lld", "mold"),
                                            ::testing::Values("exe", "pie", "shared", "pie_stripped")),
                         [](const ::testing::TestParamInfo<LinkedProgram>& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace ptd::testing
