// Which code is which function in a summary, from real programs recorded under Valgrind:
// a call through a .plt.got stub is a call of the function the stub jumps to, and a
// function's .cold part (catch blocks, unlikely paths) is that function, so entering it is
// no call and leaving it no new call of its parent; in a stripped program each function the
// unwind index knows is one unnamed function, and only the entry point is _start. Counts are
// callgrind's and the source's.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

class FunctionIdentityTest : public ValgrindRecordingTest<> {
 protected:
  DecodedRecording Record(const std::string& program) {
    return RecordUnderValgrindForTest({Program(program)}, tmp_.path());
  }
};

TEST_F(FunctionIdentityTest, CallsThroughPltGotStubsAreCallsOfTheirTarget) {
  DecodedRecording rec = Record("ptd_prog_plt_got");
  ASSERT_FALSE(rec.dir.empty());
  // No slice is named after an offset in the program: every stub has its target's name.
  for (const auto& [name, calls] : rec.decoded.calls) {
    EXPECT_EQ(name.find("ptd_prog_plt_got+0x"), std::string::npos) << name << " (" << calls << " calls)";
  }
  EXPECT_EQ(CallsOf(rec.decoded.calls, "main"), 1u);
  // main's 7 strlen calls begin in main, named after the implementation glibc's ifunc chose.
  uint64_t strlen_calls_in_main = 0;
  for (const auto& [name, parents] : rec.decoded.parents) {
    if (name.find("strlen") != std::string::npos) strlen_calls_in_main += CallsOf(parents, "main");
  }
  EXPECT_EQ(strlen_calls_in_main, 7u);
}

TEST_F(FunctionIdentityTest, ColdPartsAreTheirParentFunction) {
  DecodedRecording rec = Record("ptd_prog_cxx_cold");
  ASSERT_FALSE(rec.dir.empty());
  EXPECT_EQ(CallsOf(rec.decoded.calls, "main"), 1u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "may_throw(int)"), 8u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "main.cold"), 0u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "may_throw(int) [clone .cold]"), 0u);
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind = CallgrindCalls({Program("ptd_prog_cxx_cold")}, tmp_.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  EXPECT_EQ(CallsOf(rec.decoded.calls, "main"), CallsOf(*callgrind, "main"));
  EXPECT_EQ(CallsOf(rec.decoded.calls, "may_throw(int)"), CallsOf(*callgrind, "may_throw(int)"));
}

// The functions of ptd_prog_calls (built with symbols), by address.
std::map<std::string, uint64_t> FunctionAddresses() {
  std::map<std::string, uint64_t> addresses;
  const CommandResult nm = RunCommand({"nm", Program("ptd_prog_calls")});
  for (absl::string_view line : absl::StrSplit(nm.out, '\n')) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t address = 0;
    if (fields.size() == 3 && absl::AsciiStrToLower(fields[1]) == "t" && absl::SimpleHexAtoi(fields[0], &address)) {
      addresses[fields[2]] = address;
    }
  }
  return addresses;
}

TEST_F(FunctionIdentityTest, AStrippedProgramsFunctionsAreBoundedByItsUnwindIndex) {
  const std::map<std::string, uint64_t> addresses = FunctionAddresses();
  ASSERT_TRUE(addresses.count("tail_target")) << "nm found no symbols in " << Program("ptd_prog_calls");
  DecodedRecording rec = Record("ptd_prog_calls_stripped");
  ASSERT_FALSE(rec.dir.empty());
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind = CallgrindCalls({Program("ptd_prog_calls")}, tmp_.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  // The same calls as the program with symbols has, each under its address (the text
  // is mapped at its file offset): a tail call is a call of its own function.
  for (const char* fn : {"main", "fib", "twice", "thrice", "tail_caller", "tail_target"}) {
    const std::string unnamed = absl::StrFormat("ptd_prog_calls_stripped+0x%x", addresses.at(fn));
    EXPECT_GT(CallsOf(rec.decoded.calls, unnamed), 0u) << fn << " as " << unnamed;
    EXPECT_EQ(CallsOf(rec.decoded.calls, unnamed), CallsOf(*callgrind, fn)) << fn << " as " << unnamed;
  }
  // Only the entry point is _start: nothing the program's exit calls is.
  for (const auto& [parent, calls] : rec.decoded.parents["_start"]) {
    EXPECT_EQ(parent, "") << "_start called " << calls << " times from " << parent;
  }
}

}  // namespace
}  // namespace ptd::testing
