#pragma once
// Two decoded runs compared function by function, for regression gates in a test suite
// (docs/library.md): the figures `ptrace-direct diff` compares, from ptd::DecodeSummary
// or from a summary stored as JSON (a baseline kept in the repository).
//
//   absl::StatusOr<ptd::TraceSummary> baseline = ptd::LoadSummary("tests/parse.baseline.json");
//   absl::StatusOr<ptd::TraceSummary> run = ptd::DecodeSummary("run.trace");
//   EXPECT_TRUE(ptd::CheckNoRegression(*baseline, *run, "parse:instructions>+2%").ok());

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ptd/decoder.h"

namespace ptd {

// One function in run A and run B (absent: not in that run). Functions are matched by
// name, so two builds of a program compare.
struct FunctionDiff {
  std::string name;
  std::optional<FunctionSummary> a;
  std::optional<FunctionSummary> b;
};

struct SummaryDiff {
  // Every function of either run: largest change of self instructions first, then of
  // inclusive instructions, then of inclusive time; then by name.
  std::vector<FunctionDiff> functions;
  // Each run's totals: calls, and self instructions and self time summed over functions
  // (every instruction and ns counted once; inclusive = self here).
  FunctionSummary total_a;
  FunctionSummary total_b;
  // The table `ptrace-direct diff` prints: totals, then the `top` functions (0: all).
  std::string Table(size_t top = 30) const;
};

SummaryDiff Diff(const TraceSummary& a, const TraceSummary& b);

// A regression gate on `run` against `baseline`, as `ptrace-direct diff --fail-on` takes
// it: `[FUNCTION:|total:]FIELD>+LIMIT`, FIELD one of calls, instructions,
// self_instructions, time, self_time (the summary's time axis); LIMIT a relative growth
// (`+2%`) or an absolute one (`+1000`, times with units: `+50us`). Without a scope every
// function in both runs is checked. OK when every gate holds; FailedPrecondition naming
// each offending function otherwise ("step: calls +50.0% (100 -> 150), over
// 'calls>+10%'"); InvalidArgument for a gate that does not parse, or on p50/p99 (per-call
// latency is not in a TraceSummary: gate on those with `ptrace-direct diff`).
absl::Status CheckNoRegression(const TraceSummary& baseline, const TraceSummary& run, std::string_view gate);
absl::Status CheckNoRegression(const TraceSummary& baseline, const TraceSummary& run,
                               const std::vector<std::string>& gates);

// The per-function figures as JSON, in the format of `ptrace-direct decode --summary
// --json` (either reads the other's). Only `functions` is stored: threads, issues and
// totals are empty in what LoadSummary returns.
std::string SummaryToJson(const TraceSummary& summary);
absl::StatusOr<TraceSummary> SummaryFromJson(std::string_view json);
// The same through a file; errors name the file.
absl::Status SaveSummary(const TraceSummary& summary, const std::string& path);
absl::StatusOr<TraceSummary> LoadSummary(const std::string& path);

}  // namespace ptd
