// The public summary comparison (decoder/include/ptd/summary_diff.h) over the one diff
// `ptrace-direct diff` uses (ftf/function_stats_diff.h): summaries are converted to its
// per-function statistics and back, nothing is compared here.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "ftf/function_stats_diff.h"
#include "ptd/summary_diff.h"

namespace ptd {
namespace {

// A TraceSummary carries no per-call latency: has_latency stays false.
ftf::FunctionStats StatsOf(const std::string& name, const FunctionSummary& f) {
  ftf::FunctionStats s;
  s.name = name;
  s.calls = f.calls;
  s.total_instructions = f.inclusive_instructions;
  s.self_instructions = f.self_instructions;
  s.has_instructions = true;
  s.total_ns = f.inclusive_time;
  s.self_ns = f.self_time;
  return s;
}

FunctionSummary SummaryOf(const ftf::FunctionStats& s) {
  FunctionSummary f;
  f.calls = s.calls;
  f.inclusive_instructions = s.total_instructions;
  f.self_instructions = s.self_instructions;
  f.inclusive_time = s.total_ns;
  f.self_time = s.self_ns;
  return f;
}

ftf::FunctionStatsSummary StatsOf(const TraceSummary& summary) {
  ftf::FunctionStatsSummary stats;
  for (const auto& [name, f] : summary.functions) stats.functions.push_back(StatsOf(name, f));
  return stats;
}

std::optional<FunctionSummary> SummaryOf(const std::optional<ftf::FunctionStats>& s) {
  if (!s) return std::nullopt;
  return SummaryOf(*s);
}

}  // namespace

std::string SummaryDiff::Table(size_t top) const {
  ftf::FunctionStatsDiff diff;
  diff.total_a = StatsOf("total", total_a);
  diff.total_b = StatsOf("total", total_b);
  for (const FunctionDiff& f : functions) {
    ftf::FunctionChange c;
    c.name = f.name;
    if (f.a) c.a = StatsOf(f.name, *f.a);
    if (f.b) c.b = StatsOf(f.name, *f.b);
    diff.functions.push_back(std::move(c));
  }
  return ftf::FormatFunctionStatsDiff(diff, top);
}

SummaryDiff Diff(const TraceSummary& a, const TraceSummary& b) {
  const ftf::FunctionStatsDiff diff = ftf::DiffFunctionStats(StatsOf(a), StatsOf(b));
  SummaryDiff out;
  out.total_a = SummaryOf(diff.total_a);
  out.total_b = SummaryOf(diff.total_b);
  for (const ftf::FunctionChange& c : diff.functions) out.functions.push_back({c.name, SummaryOf(c.a), SummaryOf(c.b)});
  return out;
}

absl::Status CheckNoRegression(const TraceSummary& baseline, const TraceSummary& run,
                               const std::vector<std::string>& gates) {
  std::vector<ftf::DiffGate> parsed;
  for (const std::string& text : gates) {
    absl::StatusOr<ftf::DiffGate> gate = ftf::ParseDiffGate(text);
    if (!gate.ok()) return gate.status();
    if (gate->field == ftf::DiffField::kP50 || gate->field == ftf::DiffField::kP99) {
      return absl::InvalidArgumentError(absl::StrCat("regression gate '", text,
                                                     "': a TraceSummary has no per-call latency (p50, p99); gate on "
                                                     "them with `ptrace-direct diff`"));
    }
    parsed.push_back(*std::move(gate));
  }
  const std::vector<std::string> broken =
      ftf::CheckDiffGates(ftf::DiffFunctionStats(StatsOf(baseline), StatsOf(run)), parsed);
  if (broken.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("regression: ", absl::StrJoin(broken, "; ")));
}

absl::Status CheckNoRegression(const TraceSummary& baseline, const TraceSummary& run, std::string_view gate) {
  return CheckNoRegression(baseline, run, std::vector<std::string>{std::string(gate)});
}

std::string SummaryToJson(const TraceSummary& summary) { return ftf::FunctionStatsJson(StatsOf(summary), 0); }

absl::StatusOr<TraceSummary> SummaryFromJson(std::string_view json) {
  absl::StatusOr<ftf::FunctionStatsSummary> stats = ftf::FunctionStatsFromJson(absl::string_view(json.data(), json.size()));
  if (!stats.ok()) return stats.status();
  TraceSummary summary;
  for (const ftf::FunctionStats& s : stats->functions) summary.functions[s.name] = SummaryOf(s);
  return summary;
}

absl::Status SaveSummary(const TraceSummary& summary, const std::string& path) {
  return WriteFileAtomic(path, SummaryToJson(summary));
}

absl::StatusOr<TraceSummary> LoadSummary(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<TraceSummary> summary = SummaryFromJson(*text);
  if (!summary.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", summary.status().message()));
  return summary;
}

}  // namespace ptd
