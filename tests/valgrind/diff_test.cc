// Comparing runs on two builds of one program recorded under Valgrind
// (tests/programs/prog_diff_work.c: step() called 100 or 150 times), through the CLI
// (`ptrace-direct diff`) and the library (ptd/summary_diff.h): the change is exactly the
// one made, no other function's own work moves, a gate on it fails naming only it; and
// one program recorded twice gives the same exact figures (a determinism check).
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ptd/decoder.h"
#include "ptd/summary_diff.h"
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

// Each test runs in a process of its own (ctest): it records what it needs once and
// checks the CLI and the library on the same recordings.
class DiffTest : public ValgrindRecordingTest<> {
 protected:
  // `program` recorded under Valgrind into DIR, and the library's summary of it.
  std::string Record(const std::string& program, const std::string& dir, TraceSummary* summary) {
    const std::string trace = tmp_.Sub(dir);
    const CommandResult r = RunCli({"record", "-q", "--emulate=valgrind", "-o", trace, "--", Program(program)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    absl::StatusOr<TraceSummary> s = DecodeSummary(trace);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) *summary = *std::move(s);
    return trace;
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
  // ftf-dump of an FTF file: each process's (by name) begin, end and instant events in
  // order, without their pid and tid (koids differ between files).
  static std::map<std::string, std::vector<std::string>> SlicesByProcess(const std::string& ftf) {
    std::map<std::string, std::vector<std::string>> out;
    const CommandResult dump = RunCli({"ftf-dump", ftf});
    EXPECT_EQ(dump.exit_code, 0) << dump.err;
    std::map<std::string, std::string> process_names;  // koid -> name
    static const std::regex process(R"re(kernel_object process koid=(\d+) name="(.*)")re");
    static const std::regex event(R"(^@\S+ ((begin|end|instant) ts=\S+) pid=(\d+) tid=\d+ (.*)$)");
    std::istringstream lines(dump.out);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (std::regex_search(line, m, process)) {
        process_names[m[1]] = m[2];
      } else if (std::regex_match(line, m, event)) {
        out[process_names[m[3]]].push_back(absl::StrCat(m[1].str(), " ", m[4].str()));
      }
    }
    return out;
  }
};

TEST_F(DiffTest, TwoBuildsDifferInExactlyTheChangedFunction) {
  TraceSummary summary_a, summary_b;
  const std::string a = Record("ptd_prog_diff_a", "a.dir", &summary_a);
  const std::string b = Record("ptd_prog_diff_b", "b.dir", &summary_b);
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
  // Both runs side by side in one FTF file: one process per run, named for it, holding
  // the slices its own decode writes; the comparison is the same.
  const std::string side_by_side = tmp_.Sub("a_b.ftf");
  const CommandResult with_ftf = RunCli({"diff", a, b, "--json", "-o", side_by_side});
  ASSERT_EQ(with_ftf.exit_code, 0) << with_ftf.err;
  EXPECT_EQ(with_ftf.out, json.out);
  const std::map<std::string, std::vector<std::string>> runs = SlicesByProcess(side_by_side);
  ASSERT_EQ(runs.size(), 2u) << "processes in the side-by-side file";
  for (const std::string& run : {a, b}) {
    const std::string own = tmp_.Sub(absl::StrCat(run == a ? "a" : "b", ".ftf"));
    ASSERT_EQ(RunCli({"decode", "-q", run, "-o", own}).exit_code, 0);
    const std::map<std::string, std::vector<std::string>> decoded = SlicesByProcess(own);
    ASSERT_EQ(decoded.size(), 1u);
    const std::string name = absl::StrCat(run == a ? "A: " : "B: ", run);
    ASSERT_TRUE(runs.count(name)) << name;
    EXPECT_GT(decoded.begin()->second.size(), 100u);
    EXPECT_TRUE(runs.at(name) == decoded.begin()->second) << name << ": other slices than its own decode's";
  }
  // The baseline may be a stored summary (decode --summary --json).
  const CommandResult cli_baseline = RunCli({"decode", "-q", a, "--summary", "--json"});
  ASSERT_EQ(cli_baseline.exit_code, 0) << cli_baseline.err;
  const std::string stored = tmp_.Sub("baseline.json");
  ASSERT_TRUE(WriteFileAtomic(stored, cli_baseline.out).ok());
  // (A summary holds no slices to write side by side.)
  const CommandResult no_slices = RunCli({"diff", stored, b, "-o", tmp_.Sub("none.ftf")});
  EXPECT_EQ(no_slices.exit_code, 2);
  EXPECT_THAT(no_slices.err, HasSubstr("--output writes the runs' slices from their traces"));
  EXPECT_FALSE(PathExists(tmp_.Sub("none.ftf")));
  const CommandResult from_stored = RunCli({"diff", stored, b, "--fail-on", "calls>+10%"});
  EXPECT_EQ(from_stored.exit_code, 1);
  EXPECT_THAT(from_stored.err, HasSubstr("step: calls +50.0%"));

  // The library (ptd/summary_diff.h) on the same two runs: the same diff and gates.
  const SummaryDiff diff = Diff(summary_a, summary_b);
  ASSERT_GE(diff.functions.size(), 2u);
  // The largest changes of own work first: step's calls and parse's loop.
  EXPECT_THAT((std::vector<std::string>{diff.functions[0].name, diff.functions[1].name}),
              ::testing::UnorderedElementsAre("step", "parse"));
  for (const FunctionDiff& f : diff.functions) {
    ASSERT_TRUE(f.a && f.b) << f.name << " in one run only";
    if (f.name == "step") {
      EXPECT_EQ(f.a->calls, 100u);
      EXPECT_EQ(f.b->calls, 150u);
      EXPECT_EQ(f.b->inclusive_instructions * 2, f.a->inclusive_instructions * 3);
    } else if (f.name != "parse") {
      EXPECT_EQ(f.a->calls, f.b->calls) << f.name;
      EXPECT_EQ(f.a->self_instructions, f.b->self_instructions) << f.name;
    }
  }
  EXPECT_EQ(diff.total_b.calls - diff.total_a.calls, 50u);
  EXPECT_THAT(diff.Table(), HasSubstr("step"));
  const absl::Status calls = CheckNoRegression(summary_a, summary_b, "calls>+10%");
  EXPECT_EQ(calls.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(calls.message()), HasSubstr("step: calls +50.0% (100 -> 150)"));
  EXPECT_THAT(std::string(calls.message()), Not(HasSubstr("parse")));
  EXPECT_TRUE(CheckNoRegression(summary_a, summary_b, "step:instructions>+51%").ok());
  EXPECT_FALSE(CheckNoRegression(summary_a, summary_b, "step:instructions>+49%").ok());
  EXPECT_TRUE(CheckNoRegression(summary_b, summary_a, "instructions>+0").ok());  // B -> A shrinks
  EXPECT_EQ(CheckNoRegression(summary_a, summary_b, "speed>+1%").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckNoRegression(summary_a, summary_b, "p99>+1%").code(),
            absl::StatusCode::kInvalidArgument);
  // DecodeSummary -> file -> baseline, as a repository keeps it.
  const std::string path = tmp_.Sub("library-baseline.json");
  ASSERT_TRUE(SaveSummary(summary_a, path).ok());
  absl::StatusOr<TraceSummary> baseline = LoadSummary(path);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  ASSERT_EQ(baseline->functions.size(), summary_a.functions.size());
  for (const auto& [name, f] : summary_a.functions) {
    const FunctionSummary& back = baseline->functions.at(name);
    EXPECT_EQ(back.calls, f.calls) << name;
    EXPECT_EQ(back.inclusive_instructions, f.inclusive_instructions) << name;
    EXPECT_EQ(back.self_instructions, f.self_instructions) << name;
    EXPECT_EQ(back.inclusive_time, f.inclusive_time) << name;
    EXPECT_EQ(back.self_time, f.self_time) << name;
  }
  EXPECT_THAT(std::string(CheckNoRegression(*baseline, summary_b, "calls>+10%").message()),
              HasSubstr("step: calls"));
  // The CLI reads the library's baseline, and a p99 gate on it cannot pass unseen.
  EXPECT_EQ(RunCli({"diff", path, b, "--fail-on", "step:calls>+49%"}).exit_code, 1);
  const CommandResult p99 = RunCli({"diff", path, b, "--fail-on", "step:p99>+1000%"});
  EXPECT_EQ(p99.exit_code, 1);
  EXPECT_THAT(p99.err, HasSubstr("step: p99 unknown in run A"));
  // A damaged baseline is an error naming the file.
  const std::string bad = tmp_.Sub("bad.json");
  ASSERT_TRUE(WriteFileAtomic(bad, std::string_view("{\"functions\": 3}")).ok());
  EXPECT_THAT(std::string(LoadSummary(bad).status().message()), HasSubstr(bad));
  EXPECT_FALSE(LoadSummary(tmp_.Sub("missing.json")).ok());
}

// Under Valgrind every count is exact: a second run of the same program has every call
// and instruction count equal (times are not exact: they come from the timing packets and
// include the system calls' real length).
TEST_F(DiffTest, OneProgramRecordedTwiceHasEveryExactFigureEqual) {
  TraceSummary first, second;
  const std::string first_dir = Record("ptd_prog_diff_a", "first.dir", &first);
  const std::string second_dir = Record("ptd_prog_diff_a", "second.dir", &second);
  ASSERT_EQ(first.functions.size(), second.functions.size());
  for (const auto& [name, f] : first.functions) {
    ASSERT_TRUE(second.functions.count(name)) << name;
    const FunctionSummary& g = second.functions.at(name);
    EXPECT_EQ(f.calls, g.calls) << name;
    EXPECT_EQ(f.inclusive_instructions, g.inclusive_instructions) << name;
    EXPECT_EQ(f.self_instructions, g.self_instructions) << name;
  }
  EXPECT_EQ(first.totals.instructions, second.totals.instructions);
  EXPECT_EQ(first.totals.calls, second.totals.calls);
  EXPECT_TRUE(CheckNoRegression(first, second, {"instructions>+0", "self_instructions>+0", "calls>+0"}).ok());
  // The CLI agrees.
  const CommandResult diff = RunCli({"diff", first_dir, second_dir, "--fail-on", "instructions>+0", "--fail-on",
                                     "calls>+0", "--fail-on", "self_instructions>+0"});
  EXPECT_EQ(diff.exit_code, 0) << diff.err;
}

}  // namespace
}  // namespace ptd::testing
