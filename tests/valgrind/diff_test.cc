// `ptrace-direct diff` on two builds of one program recorded under Valgrind
// (tests/programs/prog_diff_work.c: step() called 100 or 150 times): the change is
// exactly the one made, no other function's own work moves, a gate on it fails naming
// only it; and one program recorded twice gives the same counts (exact under Valgrind).
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Counts {
  uint64_t calls = 0;
  uint64_t instructions = 0;
  uint64_t self_instructions = 0;
};

class DiffTest : public ::testing::Test {
 protected:
  void SetUp() override { SkipUnlessValgrindRecords(); }
  std::string Record(const std::string& program, const std::string& dir) {
    const CommandResult r = RunCli({"record", "-q", "--emulate=valgrind", "-o", tmp_.Sub(dir), "--", Program(program)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return tmp_.Sub(dir);
  }
  // diff's JSON: per function, run A's and B's counts (absent: not in that run).
  static std::map<std::string, std::pair<Counts, Counts>> Parse(const std::string& json) {
    std::map<std::string, std::pair<Counts, Counts>> out;
    const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << json.substr(0, 200);
    if (j.is_discarded()) return out;
    for (const auto& f : j["functions"]) {
      auto counts = [](const nlohmann::json& run) {
        Counts c;
        if (run.is_null()) return c;
        c.calls = run.value("calls", uint64_t{0});
        c.instructions = run.value("total_instructions", uint64_t{0});
        c.self_instructions = run.value("self_instructions", uint64_t{0});
        return c;
      };
      out[f["name"].get<std::string>()] = {counts(f["a"]), counts(f["b"])};
    }
    return out;
  }
  TempDir tmp_;
};

TEST_F(DiffTest, TwoBuildsDifferInExactlyTheChangedFunction) {
  const std::string a = Record("ptd_prog_diff_a", "a.dir");
  const std::string b = Record("ptd_prog_diff_b", "b.dir");
  const CommandResult json = RunCli({"diff", a, b, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto functions = Parse(json.out);
  ASSERT_TRUE(functions.count("step") && functions.count("parse")) << json.out.substr(0, 400);
  const auto& [step_a, step_b] = functions.at("step");
  EXPECT_EQ(step_a.calls, 100u);
  EXPECT_EQ(step_b.calls, 150u);
  EXPECT_EQ(step_b.instructions * 2, step_a.instructions * 3);  // the same work per call
  for (const auto& [name, runs] : functions) {
    if (name == "step" || name == "parse") continue;
    EXPECT_EQ(runs.first.calls, runs.second.calls) << name;
    EXPECT_EQ(runs.first.self_instructions, runs.second.self_instructions) << name;
  }
  // A CI gate: more calls than 10 % over the baseline fails, naming step only.
  const CommandResult gated = RunCli({"diff", a, b, "--fail-on", "calls>+10%"});
  EXPECT_EQ(gated.exit_code, 1);
  EXPECT_THAT(gated.err, HasSubstr("regression: step: calls +50.0% (100 -> 150)"));
  EXPECT_THAT(gated.err, Not(HasSubstr("parse")));
  EXPECT_THAT(gated.out, HasSubstr("step"));
  EXPECT_EQ(RunCli({"diff", a, b, "--fail-on", "step:instructions>+51%"}).exit_code, 0);
  EXPECT_EQ(RunCli({"diff", a, b, "--fail-on", "step:instructions>+49%"}).exit_code, 1);
  // The baseline may be a stored summary (decode --summary --json).
  const CommandResult baseline = RunCli({"decode", "-q", a, "--summary", "--json"});
  ASSERT_EQ(baseline.exit_code, 0) << baseline.err;
  const std::string stored = tmp_.Sub("baseline.json");
  ASSERT_TRUE(WriteFileAtomic(stored, baseline.out).ok());
  const CommandResult from_stored = RunCli({"diff", stored, b, "--fail-on", "calls>+10%"});
  EXPECT_EQ(from_stored.exit_code, 1);
  EXPECT_THAT(from_stored.err, HasSubstr("step: calls +50.0%"));
}

TEST_F(DiffTest, OneProgramRecordedTwiceHasTheSameCounts) {
  const std::string first = Record("ptd_prog_diff_a", "first.dir");
  const std::string second = Record("ptd_prog_diff_a", "second.dir");
  const CommandResult diff = RunCli({"diff", first, second, "--json", "--fail-on", "instructions>+0", "--fail-on",
                                     "calls>+0", "--fail-on", "self_instructions>+0"});
  EXPECT_EQ(diff.exit_code, 0) << diff.err;
  for (const auto& [name, runs] : Parse(diff.out)) {
    EXPECT_EQ(runs.first.calls, runs.second.calls) << name;
    EXPECT_EQ(runs.first.instructions, runs.second.instructions) << name;
    EXPECT_EQ(runs.first.self_instructions, runs.second.self_instructions) << name;
  }
}

}  // namespace
}  // namespace ptd::testing
