#pragma once
// Two runs compared function by function (`ptrace-direct diff`): calls, instructions
// (total and self), time (total, self) and latency per call (p50, p99) in each run and
// the change, with regression gates for CI ("instructions>+2%": fail when a function
// grew by more). Functions are matched by name, so two builds of a program compare.

#include <cstdint>
#include <optional>
#include <string>

#include <vector>

#include "absl/status/statusor.h"
#include "ftf/function_stats.h"

namespace ptd::ftf {

// One function in run A and run B (absent: not in that run).
struct FunctionChange {
  std::string name;
  std::optional<FunctionStats> a;
  std::optional<FunctionStats> b;
};

struct FunctionStatsDiff {
  // Every function of either run: largest change of self instructions first (where the
  // work changed), then of total instructions, then of total time; then by name.
  std::vector<FunctionChange> functions;
  // The runs' totals: calls, and self instructions and self time summed over functions
  // (every instruction and every ns counted once).
  FunctionStats total_a;
  FunctionStats total_b;
};

FunctionStatsDiff DiffFunctionStats(const FunctionStatsSummary& a, const FunctionStatsSummary& b);

// The figures a gate can check.
enum class DiffField { kCalls, kInstructions, kSelfInstructions, kTime, kSelfTime, kP50, kP99 };

// A regression gate: `[SCOPE:]FIELD>+LIMIT`. FIELD is calls, instructions,
// self_instructions, time, self_time, p50 or p99; LIMIT is a relative growth (`+2%`) or
// an absolute one (`+1000`; time fields take units: `+50us`, `+1ms`). SCOPE is a
// function name (that function only), `total` (the runs' totals) or absent (each
// function present in both runs; a function new in B counts from 0 for absolute
// limits and is left out of relative ones).
struct DiffGate {
  std::string text;   // as given
  std::string scope;  // "" every function, "total", or a function name
  DiffField field = DiffField::kInstructions;
  bool relative = false;
  double limit = 0;  // percent, or the field's unit (ns for times)
};

absl::StatusOr<DiffGate> ParseDiffGate(absl::string_view text);

// What breaks `gates`, one line each ("parse: instructions +4.1 % (1200 -> 1250), over
// +2 %"); empty when every gate holds.
std::vector<std::string> CheckDiffGates(const FunctionStatsDiff& diff, const std::vector<DiffGate>& gates);

// A table for the terminal: the totals, then the `top` functions (0: all) in the diff's
// order, new and vanished ones marked.
std::string FormatFunctionStatsDiff(const FunctionStatsDiff& diff, size_t top);
// {"total": {"a": {...}, "b": {...}}, "functions": [{"name", "a": {...} | null, "b": ...}]}
// with FunctionStatsJson's fields per run.
std::string FunctionStatsDiffJson(const FunctionStatsDiff& diff);

}  // namespace ptd::ftf
