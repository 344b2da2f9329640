// `ptrace-direct diff A B`: two runs compared per function (ftf/function_stats_diff.h).
// Each run is a trace directory or perf.data (decoded), an FTF file (read), or a summary
// stored with `decode --summary --json` (a baseline kept in a repository).
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "common/file_util.h"
#include "decoder/trace_decoder.h"
#include "ftf/ftf_summary.h"
#include "ftf/function_stats_diff.h"
#include "perfdata/perf_data_input.h"

namespace ptd::cli {
namespace {

struct DiffArgs {
  std::string a;
  std::string b;
  std::vector<std::string> fail_on;
  std::vector<std::string> buildid_dirs;
  bool verbose = false;
  bool json = false;
  int top = 30;
  std::string time_axis = "time";
  std::string output;  // both runs side by side as FTF
};

absl::StatusOr<decoder::DecodeOptions> DecodeOptionsFor(const DiffArgs& args) {
  decoder::DecodeOptions options;
  if (args.time_axis == "instructions") {
    options.axis = decoder::TimeAxisChoice::kInstructions;
  } else if (args.time_axis == "cycles") {
    options.axis = decoder::TimeAxisChoice::kCycles;
  } else if (args.time_axis != "time") {
    return absl::InvalidArgumentError("--time-axis must be time, cycles or instructions");
  }
  return options;
}

void WarnAboutDecode(const std::string& input, const decoder::DecodeResult& result) {
  for (const std::string& w : result.warnings) std::fprintf(stderr, "ptrace-direct: warning: %s: %s\n", input.c_str(), w.c_str());
  if (result.stats[decoder::Stat::kErrors] > 0) {
    std::fprintf(stderr, "ptrace-direct: warning: %s: %llu decode errors: its counts stop and restart there\n",
                 input.c_str(), static_cast<unsigned long long>(result.stats[decoder::Stat::kErrors]));
  }
}

// The per-function statistics of one run, from whatever the user has of it.
absl::StatusOr<ftf::FunctionStatsSummary> SummarizeRun(const std::string& input, const DiffArgs& args) {
  // Told apart by content, as decode and ftf-dump do: a directory, a perf.data, a JSON
  // summary, else an FTF file (plain or gzip; its reader names what is wrong).
  if (!IsDirectory(input) && !perfdata::IsPerfDataFile(input)) {
    char first = 0;
    std::ifstream(input) >> first;  // skips white space
    if (first == '{') {
      absl::StatusOr<std::string> text = ReadFileToString(input);
      if (!text.ok()) return text.status();
      absl::StatusOr<ftf::FunctionStatsSummary> summary = ftf::FunctionStatsFromJson(*text);
      if (!summary.ok()) return absl::InvalidArgumentError(absl::StrCat(input, ": ", summary.status().message()));
      return summary;
    }
    absl::StatusOr<ftf::FtfSummary> summary = ftf::SummarizeFtfFile(input);
    if (!summary.ok()) return summary.status();
    return summary->functions;
  }
  absl::StatusOr<decoder::DecodeOptions> options = DecodeOptionsFor(args);
  if (!options.ok()) return options.status();
  absl::StatusOr<perfdata::DecodeInput> decode_input = perfdata::DecodeInput::Open(input, args.buildid_dirs);
  if (!decode_input.ok()) return decode_input.status();
  ftf::FunctionStatsBuilder stats;
  options->function_stats = &stats;
  absl::StatusOr<decoder::DecodeResult> result = decoder::DecodeTraceToFtf(decode_input->trace_dir(), "", *options);
  if (!result.ok()) return result.status();
  WarnAboutDecode(input, *result);
  return stats.Finish();
}

// `--output`: both runs decoded into one FTF file, one process each (named "A: path"
// and "B: path"), and summarised on the way.
absl::StatusOr<std::pair<ftf::FunctionStatsSummary, ftf::FunctionStatsSummary>> DecodeSideBySide(
    const DiffArgs& args) {
  for (const std::string& input : {args.a, args.b}) {
    if (!IsDirectory(input) && !perfdata::IsPerfDataFile(input)) {
      return absl::InvalidArgumentError(absl::StrCat(
          input, ": --output writes the runs' slices from their traces: give trace directories or perf.data files"));
    }
  }
  absl::StatusOr<decoder::DecodeOptions> options = DecodeOptionsFor(args);
  if (!options.ok()) return options.status();
  absl::StatusOr<perfdata::DecodeInput> input_a = perfdata::DecodeInput::Open(args.a, args.buildid_dirs);
  if (!input_a.ok()) return input_a.status();
  absl::StatusOr<perfdata::DecodeInput> input_b = perfdata::DecodeInput::Open(args.b, args.buildid_dirs);
  if (!input_b.ok()) return input_b.status();
  ftf::FunctionStatsBuilder stats_a, stats_b;
  std::vector<decoder::FtfRun> runs = {{input_a->trace_dir(), absl::StrCat("A: ", args.a), *options},
                                       {input_b->trace_dir(), absl::StrCat("B: ", args.b), *options}};
  runs[0].options.function_stats = &stats_a;
  runs[1].options.function_stats = &stats_b;
  absl::StatusOr<std::vector<decoder::DecodeResult>> results = decoder::DecodeTracesToOneFtf(runs, args.output);
  if (!results.ok()) return results.status();
  WarnAboutDecode(args.a, (*results)[0]);
  WarnAboutDecode(args.b, (*results)[1]);
  return std::make_pair(stats_a.Finish(), stats_b.Finish());
}

int RunDiff(const DiffArgs& args) {
  std::vector<ftf::DiffGate> gates;
  for (const std::string& text : args.fail_on) {
    absl::StatusOr<ftf::DiffGate> gate = ftf::ParseDiffGate(text);
    if (!gate.ok()) return ReportError(gate.status());
    gates.push_back(*gate);
  }
  ftf::FunctionStatsSummary a, b;
  if (!args.output.empty()) {
    absl::StatusOr<std::pair<ftf::FunctionStatsSummary, ftf::FunctionStatsSummary>> both = DecodeSideBySide(args);
    if (!both.ok()) return ReportError(both.status());
    a = std::move(both->first);
    b = std::move(both->second);
  } else {
    absl::StatusOr<ftf::FunctionStatsSummary> summary_a = SummarizeRun(args.a, args);
    if (!summary_a.ok()) return ReportError(summary_a.status());
    absl::StatusOr<ftf::FunctionStatsSummary> summary_b = SummarizeRun(args.b, args);
    if (!summary_b.ok()) return ReportError(summary_b.status());
    a = *std::move(summary_a);
    b = *std::move(summary_b);
  }
  const ftf::FunctionStatsDiff diff = ftf::DiffFunctionStats(a, b);
  const std::string text = args.json ? ftf::FunctionStatsDiffJson(diff)
                                     : ftf::FormatFunctionStatsDiff(diff, static_cast<size_t>(std::max(args.top, 0)));
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  const std::vector<std::string> broken = ftf::CheckDiffGates(diff, gates);
  for (const std::string& line : broken) std::fprintf(stderr, "ptrace-direct: regression: %s\n", line.c_str());
  return broken.empty() ? kExitOk : kExitFailure;
}

}  // namespace

void RegisterDiffCommand(CLI::App& app, CliContext& ctx) {
  auto [cmd, args] = AddSubcommand<DiffArgs>(
      app, ctx, "diff", "Compare two runs per function: calls, instructions, time, latency; --fail-on gates for CI",
      RunDiff);
  cmd->add_option("a", args->a, "Run A (the baseline): trace directory, perf.data, .ftf[.gz], or decode --summary --json")
      ->required();
  cmd->add_option("b", args->b, "Run B, the same kinds")->required();
  cmd->add_option("--fail-on", args->fail_on,
                  "Exit 1 when B grew past this (repeatable): [FUNCTION:|total:]FIELD>+LIMIT, FIELD one of calls, "
                  "instructions, self_instructions, time, self_time, p50, p99; LIMIT +2% or +1000 or +1ms");
  cmd->add_option("--top", args->top, "Functions listed, largest change of their own instructions first (0: all; default 30)");
  cmd->add_flag("--json", args->json, "Every function of both runs as JSON");
  cmd->add_option("--time-axis", args->time_axis, "For traces decoded here: time (default), cycles or instructions");
  cmd->add_option("-o,--output", args->output,
                  "Also write both runs side by side to this FTF file (.ftf or .ftf.gz; Perfetto): one process per run, "
                  "named 'A: path' and 'B: path' (trace directories and perf.data only)");
  AddMissingBinaryOptions(cmd, &args->buildid_dirs, &args->verbose);
}

}  // namespace ptd::cli
