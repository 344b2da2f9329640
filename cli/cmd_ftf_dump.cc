// `ptrace-direct ftf-dump FILE`: an FTF file's records as text, a summary (threads,
// slices, top functions) and, with --check, the structural checks the project's own
// output must pass.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "ftf/ftf_checker.h"
#include "ftf/ftf_reader.h"
#include "ftf/ftf_summary.h"
#include "ftf/ftf_text.h"

namespace ptd::cli {
namespace {

struct FtfDumpOptions {
  std::string file;
  bool summary_only = false;
  bool check = false;
  size_t top = 20;
  std::string function;  // --summary: its slowest calls
  size_t slowest = 10;
  bool json = false;
};

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

int RunFtfDump(const FtfDumpOptions& options) {
  absl::StatusOr<std::unique_ptr<ftf::FtfReader>> reader = ftf::FtfReader::Open(options.file);
  if (!reader.ok()) return ReportError(reader.status());
  const bool print_records = !options.summary_only && !options.check;
  const bool print_summary = options.summary_only || !options.check;
  ftf::FunctionStatsOptions function_options;
  function_options.slowest_of = options.function;
  function_options.slowest_count = options.slowest;
  ftf::FtfSummarizer summarizer(function_options);
  ftf::FtfChecker checker;
  const absl::Status read_error = ftf::ForEachRecord(**reader, [&](const ftf::FtfRecord& record) {
    if (print_records) {
      std::string line = ftf::FormatRecord(record);
      line.push_back('\n');
      Print(line);
    }
    if (print_summary) summarizer.Add(record);
    if (options.check) checker.Add(record);
  });
  if (print_summary) {
    if (print_records) Print("\n");
    const ftf::FtfSummary summary = summarizer.Finish();
    Print(options.json ? ftf::FunctionStatsJson(summary.functions, 0) : ftf::FormatFtfSummary(summary, options.top));
  }
  std::fflush(stdout);
  if (options.check) {
    if (!read_error.ok()) checker.AddReadError(std::string(read_error.message()));
    std::vector<std::string> problems = checker.Finish();
    if (problems.empty()) {
      std::printf("%s: structure OK (%llu records)\n", options.file.c_str(),
                  static_cast<unsigned long long>((*reader)->stats().records));
      return kExitOk;
    }
    std::printf("%s: %zu structural problem(s):\n", options.file.c_str(),
                checker.problem_count());
    for (const std::string& problem : problems) std::printf("  %s\n", problem.c_str());
    return kExitFailure;
  }
  if (!read_error.ok()) return ReportError(read_error);
  return kExitOk;
}

}  // namespace

void RegisterFtfDumpCommand(CLI::App& app, CliContext& ctx) {
  auto [cmd, options] = AddSubcommand<FtfDumpOptions>(
      app, ctx, "ftf-dump", "Print an FTF file's records and a summary (threads, slices, top functions)",
      [](const FtfDumpOptions& options) {
        if ((!options.function.empty() || options.json) && !options.summary_only) {
          return ReportError(absl::InvalidArgumentError("--function and --json go with --summary"));
        }
        return RunFtfDump(options);
      });
  cmd->add_option("file", options->file, "FTF file (.ftf or .ftf.gz)")->required();
  cmd->add_flag("--summary", options->summary_only, "Print only the summary");
  cmd->add_flag("--check", options->check,
                "Check structure (balanced begin/end, time order, thread and process names); "
                "exit 1 on problems");
  cmd->add_option("--top", options->top, "Functions listed by total (with latency) and by self time")
      ->default_val(20)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--function", options->function, "With --summary: list the slowest calls of this function");
  cmd->add_option("--slowest", options->slowest, "With --function: how many calls")->default_val(10);
  cmd->add_flag("--json", options->json, "With --summary: the per-function statistics as JSON (every function)");
}

}  // namespace ptd::cli
