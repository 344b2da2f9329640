// DiffFunctionStats and its gates on hand-made runs, and the stored summary read back
// (FunctionStatsJson -> FunctionStatsFromJson).
#include "ftf/function_stats_diff.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ptd::ftf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

FunctionStats Function(const std::string& name, uint64_t calls, uint64_t instructions, uint64_t self_instructions,
                       uint64_t total_ns, uint64_t p99_ns) {
  FunctionStats f;
  f.name = name;
  f.calls = calls;
  f.total_instructions = instructions;
  f.self_instructions = self_instructions;
  f.has_instructions = true;
  f.total_ns = total_ns;
  f.self_ns = total_ns / 2;
  f.p50_ns = p99_ns / 2;
  f.p99_ns = p99_ns;
  f.has_latency = true;
  return f;
}

// A: main calls parse 10 times and emit once. B: parse does 10 % more work, emit is gone,
// check is new.
FunctionStatsSummary RunA() {
  FunctionStatsSummary s;
  s.functions = {Function("main", 1, 5000, 1000, 5000, 5000), Function("parse", 10, 3000, 3000, 3000, 400),
                 Function("emit", 1, 1000, 1000, 1000, 1000)};
  return s;
}
FunctionStatsSummary RunB() {
  FunctionStatsSummary s;
  s.functions = {Function("main", 1, 4500, 1000, 4500, 4500), Function("parse", 10, 3300, 3300, 3300, 440),
                 Function("check", 2, 200, 200, 200, 100)};
  return s;
}

std::vector<std::string> Names(const FunctionStatsDiff& diff) {
  std::vector<std::string> names;
  for (const FunctionChange& c : diff.functions) names.push_back(c.name);
  return names;
}

std::vector<std::string> Broken(const FunctionStatsDiff& diff, std::vector<std::string> texts) {
  std::vector<DiffGate> gates;
  for (const std::string& t : texts) {
    absl::StatusOr<DiffGate> gate = ParseDiffGate(t);
    EXPECT_TRUE(gate.ok()) << t << ": " << gate.status();
    if (gate.ok()) gates.push_back(*gate);
  }
  return CheckDiffGates(diff, gates);
}

TEST(FunctionStatsDiffTest, EveryFunctionOfEitherRunLargestInstructionChangeFirst) {
  const FunctionStatsDiff diff = DiffFunctionStats(RunA(), RunB());
  // Self instructions: emit -1000, parse +300, check +200, main 0 (its total -500).
  EXPECT_THAT(Names(diff), ElementsAre("emit", "parse", "check", "main"));
  EXPECT_TRUE(diff.functions[0].a.has_value());
  EXPECT_FALSE(diff.functions[0].b.has_value());  // gone in B
  EXPECT_FALSE(diff.functions[2].a.has_value());  // new in B
  EXPECT_EQ(diff.total_a.self_instructions, 5000u);
  EXPECT_EQ(diff.total_b.self_instructions, 4500u);
  EXPECT_EQ(diff.total_a.calls, 12u);
  EXPECT_EQ(diff.total_b.calls, 13u);
  const std::string table = FormatFunctionStatsDiff(diff, 0);
  EXPECT_THAT(table, HasSubstr("+300"));
  EXPECT_THAT(table, HasSubstr("+10.0%"));
  EXPECT_THAT(table, HasSubstr("(gone)"));
  EXPECT_THAT(table, HasSubstr("(new)"));
}

TEST(FunctionStatsDiffTest, RelativeGatesNameOnlyTheFunctionsThatGrewPastThem) {
  const FunctionStatsDiff diff = DiffFunctionStats(RunA(), RunB());
  EXPECT_THAT(Broken(diff, {"instructions>+11%"}), IsEmpty());
  const std::vector<std::string> broken = Broken(diff, {"instructions>+5%"});
  ASSERT_THAT(broken, SizeIs(1));  // check is new: no base for a relative gate
  EXPECT_THAT(broken[0], HasSubstr("parse: instructions +10.0% (3000 -> 3300)"));
  EXPECT_THAT(Broken(diff, {"p99>+5%"}), ElementsAre(HasSubstr("parse: p99")));
  EXPECT_THAT(Broken(diff, {"calls>+0%"}), IsEmpty());
}

TEST(FunctionStatsDiffTest, AbsoluteScopedAndTotalGates) {
  const FunctionStatsDiff diff = DiffFunctionStats(RunA(), RunB());
  // New functions count from 0 for absolute limits.
  EXPECT_THAT(Broken(diff, {"instructions>+150"}), ElementsAre(HasSubstr("parse"), HasSubstr("check: instructions +200 (0 -> 200)")));
  EXPECT_THAT(Broken(diff, {"instructions>+250"}), ElementsAre(HasSubstr("parse")));
  EXPECT_THAT(Broken(diff, {"main:instructions>+0"}), IsEmpty());
  EXPECT_THAT(Broken(diff, {"parse:self_instructions>+299"}), ElementsAre(HasSubstr("parse")));
  EXPECT_THAT(Broken(diff, {"parse:time>+1us"}), IsEmpty());
  EXPECT_THAT(Broken(diff, {"parse:time>+250ns"}), ElementsAre(HasSubstr("parse: time +300 ns")));
  EXPECT_THAT(Broken(diff, {"total:instructions>+0%"}), IsEmpty());  // the run shrank
  EXPECT_THAT(Broken(diff, {"total:calls>+0"}), ElementsAre(HasSubstr("total: calls +1")));
  EXPECT_THAT(Broken(diff, {"nosuch:calls>+0"}), ElementsAre(HasSubstr("nosuch: in neither run")));
}

TEST(FunctionStatsDiffTest, LatencyGatesFailWhereARunHasNoLatency) {
  // A baseline stored without per-call latency (the library's summary): its p99 is not 0.
  FunctionStatsSummary a = RunA();
  for (FunctionStats& f : a.functions) f.has_latency = false;
  absl::StatusOr<FunctionStatsSummary> stored = FunctionStatsFromJson(FunctionStatsJson(a, 0));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_FALSE(stored->functions[0].has_latency);
  const FunctionStatsDiff diff = DiffFunctionStats(*stored, RunB());
  EXPECT_THAT(Broken(diff, {"parse:p99>+50%"}), ElementsAre(HasSubstr("parse: p99 unknown in run A")));
  EXPECT_THAT(Broken(diff, {"parse:instructions>+50%"}), IsEmpty());
  // The totals have no latency either: a gate on them cannot pass unseen.
  EXPECT_THAT(Broken(DiffFunctionStats(RunA(), RunB()), {"total:p99>+50%"}), ElementsAre(HasSubstr("unknown")));
}

TEST(FunctionStatsDiffTest, BadGatesSayWhatIsWrong) {
  for (const char* text : {"instructions", "instructions>2%", "speed>+1%", "instructions>+x%", "time>+5parsecs",
                           ":calls>+1"}) {
    absl::StatusOr<DiffGate> gate = ParseDiffGate(text);
    EXPECT_FALSE(gate.ok()) << text;
    EXPECT_THAT(std::string(gate.status().message()), HasSubstr(text));
  }
  // C++ names carry "::": the scope is what precedes the last ':'.
  absl::StatusOr<DiffGate> gate = ParseDiffGate("ns::Parser::parse:instructions>+2%");
  ASSERT_TRUE(gate.ok()) << gate.status();
  EXPECT_EQ(gate->scope, "ns::Parser::parse");
  EXPECT_TRUE(gate->relative);
  EXPECT_EQ(gate->limit, 2.0);
}

TEST(FunctionStatsDiffTest, AStoredSummaryReadsBackAsItWasWritten) {
  FunctionStatsSummary a = RunA();
  a.functions[1].histogram = {1, 2, 3, 4, 0, 0, 0, 0};
  absl::StatusOr<FunctionStatsSummary> back = FunctionStatsFromJson(FunctionStatsJson(a, 0));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_THAT(back->functions, SizeIs(3));
  for (size_t i = 0; i < 3; ++i) {
    const FunctionStats& x = a.functions[i];
    const FunctionStats& y = back->functions[i];
    EXPECT_EQ(y.name, x.name);
    EXPECT_EQ(y.calls, x.calls);
    EXPECT_EQ(y.total_instructions, x.total_instructions);
    EXPECT_EQ(y.self_instructions, x.self_instructions);
    EXPECT_EQ(y.total_ns, x.total_ns);
    EXPECT_EQ(y.p99_ns, x.p99_ns);
    EXPECT_EQ(y.histogram, x.histogram);
  }
  EXPECT_THAT(DiffFunctionStats(a, *back).functions, SizeIs(3));
  EXPECT_FALSE(FunctionStatsFromJson("not json").ok());
  EXPECT_THAT(std::string(FunctionStatsFromJson("{\"functions\": [{\"name\": \"f\"}]}").status().message()),
              HasSubstr("f: no \"calls\""));
}

}  // namespace
}  // namespace ptd::ftf
