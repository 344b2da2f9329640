#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/command.h"
#include "common/file_util.h"
#include "common/progress_bar.h"
#include "common/units.h"
#include "decoder/trace_decoder.h"
#include "ftf/function_stats.h"
#include "perfdata/perf_data_input.h"

namespace ptd::cli {

namespace {

struct DecodeArgs {
  std::string input;
  std::string output;
  std::string time_axis = "time";
  std::string decoder = "fast";
  int tid = -1;
  std::string time_range;
  std::string stats_json;
  bool quiet = false;
  bool no_debuginfod = false;
  bool no_inline = false;
  bool progress = false;
  bool verbose = false;
  int jobs = 0;                 // 0: one per core
  uint64_t piece_bytes = 0;     // 0: automatic
  std::vector<std::string> buildid_dirs;  // perf.data input only
  std::string min_duration;  // level of detail, with units
  int64_t max_depth = 0;
  bool summary = false;      // latency views
  std::string function;
  int64_t slowest = 10;
  int64_t top = 20;
  bool json = false;
  std::string window;         // T0..T1
  std::string window_offset;  // A..B
  std::string max_output_size;
};

// "A..B" with either side empty (open); each side parsed by `parse`.
absl::Status ParseRange(const std::string& text, const std::string& option, bool allow_relative,
                        absl::StatusOr<uint64_t> (*parse)(absl::string_view), decoder::DecodeWindow* window) {
  const size_t dots = text.find("..");
  if (dots == std::string::npos || text.find("..", dots + 2) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(option, " '", text, "': expected BEGIN..END (either may be empty)"));
  }
  std::string sides[2] = {text.substr(0, dots), text.substr(dots + 2)};
  bool relative[2] = {false, false};
  for (int i = 0; i < 2; ++i) {
    if (allow_relative && !sides[i].empty() && sides[i][0] == '+') {
      relative[i] = true;
      sides[i].erase(0, 1);
    }
  }
  if (relative[0] != relative[1] && !sides[0].empty() && !sides[1].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(option, " '", text, "': both ends relative (+) or neither"));
  }
  window->relative = relative[0] || relative[1];
  uint64_t* values[2] = {&window->begin, &window->end};
  for (int i = 0; i < 2; ++i) {
    if (sides[i].empty()) continue;
    absl::StatusOr<uint64_t> v = parse(sides[i]);
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(option, ": ", v.status().message()));
    *values[i] = *v;
  }
  if (window->end <= window->begin) {
    return absl::InvalidArgumentError(absl::StrCat(option, " '", text, "': the end must come after the beginning"));
  }
  return absl::OkStatus();
}

// Every option checked before any work: a typo costs nothing.
absl::Status ParseDetail(const DecodeArgs& args, decoder::DecodeOptions* options) {
  if (!args.min_duration.empty()) {
    absl::StatusOr<uint64_t> d = ParseDurationNs(args.min_duration);
    if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat("--min-duration: ", d.status().message()));
    options->detail.min_duration = *d;
  }
  if (args.max_depth < 0 || args.max_depth > 100000) {
    return absl::InvalidArgumentError("--max-depth must be between 1 and 100000 (0: no limit)");
  }
  options->detail.max_depth = static_cast<uint32_t>(args.max_depth);
  if (args.slowest < 0) return absl::InvalidArgumentError("--slowest must be 0 or more");
  if (args.top <= 0) return absl::InvalidArgumentError("--top must be 1 or more");
  if ((!args.function.empty() || args.json) && !args.summary) {
    return absl::InvalidArgumentError("--function and --json go with --summary");
  }
  if (args.output.empty() && !args.summary) return absl::InvalidArgumentError("-o OUT.ftf is required (or --summary)");
  if (!args.max_output_size.empty()) {
    absl::StatusOr<uint64_t> size = ParseByteSize(args.max_output_size);
    if (!size.ok()) return absl::InvalidArgumentError(absl::StrCat("--max-output-size: ", size.status().message()));
    if (*size < 4096) return absl::InvalidArgumentError("--max-output-size must be at least 4KB");
    if (args.output.empty()) return absl::InvalidArgumentError("--max-output-size needs -o OUT.ftf");
    options->max_output_bytes = *size;
  }
  if (!args.window.empty() && !args.window_offset.empty()) {
    return absl::InvalidArgumentError("--window and --window-offset: one or the other");
  }
  if (!args.window.empty()) {
    options->window.kind = decoder::DecodeWindow::Kind::kTime;
    if (absl::Status s = ParseRange(args.window, "--window", true, &ParseDurationNs, &options->window); !s.ok()) {
      return s;
    }
  }
  if (!args.window_offset.empty()) {
    options->window.kind = decoder::DecodeWindow::Kind::kOffset;
    if (absl::Status s = ParseRange(args.window_offset, "--window-offset", false, &ParseByteSize, &options->window);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// SIGINT/SIGTERM during a decode: stop, close every open slice, finish the file. A
// second signal kills as usual (the handler puts the default back).
std::atomic<bool> g_decode_interrupted{false};

void OnInterrupt(int signal_number) {
  g_decode_interrupted.store(true, std::memory_order_relaxed);
  ::signal(signal_number, SIG_DFL);
}

void CatchInterrupts() {
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

absl::Status RunDecode(const DecodeArgs& args) {
  decoder::DecodeOptions options;
  if (absl::Status s = ParseDetail(args, &options); !s.ok()) return s;
  absl::StatusOr<decoder::DecoderKind> kind = decoder::ParseDecoderKind(args.decoder);
  if (!kind.ok()) return kind.status();
  options.decoder = *kind;
  if (args.time_axis == "time") {
    options.axis = decoder::TimeAxisChoice::kTime;
  } else if (args.time_axis == "instructions") {
    options.axis = decoder::TimeAxisChoice::kInstructions;
  } else if (args.time_axis == "cycles") {
    options.axis = decoder::TimeAxisChoice::kCycles;
  } else {
    return absl::InvalidArgumentError("--time-axis must be time, cycles or instructions");
  }
  if (args.tid >= 0) options.tid = args.tid;
  if (!args.time_range.empty()) {
    std::vector<std::string> parts = absl::StrSplit(args.time_range, ':');
    if (parts.size() != 2 || (!parts[0].empty() && !absl::SimpleAtoi(parts[0], &options.window_begin)) ||
        (!parts[1].empty() && !absl::SimpleAtoi(parts[1], &options.window_end))) {
      return absl::InvalidArgumentError("--time-range must be BEGIN:END (output time units; either may be empty)");
    }
  }
  options.progress = args.progress || (!args.quiet && ProgressBar::StderrIsTerminal());
  options.debuginfod = !args.no_debuginfod;
  options.inlined_frames = !args.no_inline;
  if (args.jobs < 0) return absl::InvalidArgumentError("--jobs must be 1 or more (0: one per core)");
  options.jobs = args.jobs;
  options.piece_bytes = args.piece_bytes;
  CatchInterrupts();
  options.cancel = &g_decode_interrupted;
  // A perf.data is imported into a temporary trace directory, removed on return.
  absl::StatusOr<perfdata::DecodeInput> input = perfdata::DecodeInput::Open(args.input, args.buildid_dirs);
  if (!input.ok()) return input.status();
  const perfdata::TemporaryPerfImport* perf_import = input->perf_import();
  const std::string& trace_dir = input->trace_dir();
  std::optional<ftf::FunctionStatsBuilder> function_stats;
  if (args.summary) {
    ftf::FunctionStatsOptions stats_options;
    stats_options.slowest_of = args.function;
    stats_options.slowest_count = static_cast<size_t>(args.slowest);
    function_stats.emplace(stats_options);
    options.function_stats = &*function_stats;
  }
  absl::StatusOr<decoder::DecodeResult> result = decoder::DecodeTraceToFtf(trace_dir, args.output, options);
  if (!result.ok()) return result.status();
  for (const std::string& w : result->warnings) std::fprintf(stderr, "ptrace-direct: warning: %s\n", w.c_str());
  if (!args.quiet) {
    for (const std::string& n : result->notes) std::fprintf(stderr, "%s\n", n.c_str());
  }
  using decoder::Stat;
  const decoder::Stats& s = result->stats;
  MissingBinaries missing = result->missing_binaries;
  if (perf_import) missing.Add(perf_import->missing_binaries());
  WarnMissingBinaries(missing, static_cast<int64_t>(s[Stat::kErrors]), args.verbose,
                      perf_import ? perf_import->buildid_dirs() : std::vector<std::string>{});
  std::fprintf(stderr,
               "decoded %llu instructions, %llu calls, %llu returns, %llu errors, %llu overflows, "
               "%llu threads in %.3f s → %s\n",
               static_cast<unsigned long long>(s[Stat::kInstructions]), static_cast<unsigned long long>(s[Stat::kCalls]),
               static_cast<unsigned long long>(s[Stat::kReturns]), static_cast<unsigned long long>(s[Stat::kErrors]),
               static_cast<unsigned long long>(s[Stat::kOverflows]), static_cast<unsigned long long>(s[Stat::kThreads]),
               result->seconds,
               args.output.empty() ? "(no output file)" : args.output.c_str());
  if (options.detail.min_duration > 0) {
    std::fprintf(stderr, "level of detail: left out %llu slices shorter than %s\n",
                 static_cast<unsigned long long>(s[Stat::kDroppedShort]), FormatDurationNs(options.detail.min_duration).c_str());
  }
  if (options.detail.max_depth > 0) {
    std::fprintf(stderr, "level of detail: left out %llu slices deeper than %u\n",
                 static_cast<unsigned long long>(s[Stat::kDroppedDeep]), options.detail.max_depth);
  }
  if (function_stats) {
    const ftf::FunctionStatsSummary summary = function_stats->Finish();
    const std::string text = args.json ? ftf::FunctionStatsJson(summary, 0)
                                       : ftf::FormatFunctionStats(summary, static_cast<size_t>(args.top));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  if (!args.stats_json.empty()) {
    absl::Status w = WriteFileAtomic(args.stats_json, decoder::DecodeStatsJson(*result));
    if (!w.ok()) return w;
  }
  if (!result->missing_files.empty()) {
    return absl::DataLossError(absl::StrCat(
        args.input, ": ", absl::StrJoin(result->missing_files, ", "), " missing (see the warnings above); ",
        args.output.empty() ? std::string("the summary") : args.output,
        " holds what the rest of the trace gives"));
  }
  if (result->interrupted) {
    return absl::CancelledError(
        absl::StrCat("decode interrupted: ", args.output,
                     " is complete as a file but partial (it ends where decoding stopped)"));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterDecodeCommand(CLI::App& app, CliContext& ctx) {
  auto [cmd, args] = AddSubcommand<DecodeArgs>(app, ctx, "decode",
                                               "Decode a trace directory into per-thread call stacks (FTF)", RunDecode);
  cmd->add_option("input", args->input, "Trace directory or perf.data (intel_pt)")->required();
  AddMissingBinaryOptions(cmd, &args->buildid_dirs, &args->verbose);
  cmd->add_option("--output,-o", args->output, "Output .ftf or .ftf.gz (optional with --summary)");
  cmd->add_option("--time-axis", args->time_axis,
                  "time (ns), cycles (CYC packets' count; 1 cycle shows as 1 ns) or instructions (default time)");
  cmd->add_option("--decoder", args->decoder,
                  "fast (default: libipt's query decoder, own blocks), libipt-block or libipt-insn");
  cmd->add_option("--tid", args->tid, "Only this thread");
  cmd->add_option("--time-range", args->time_range, "BEGIN:END, keep slices that begin inside (output time units)");
  cmd->add_option("--stats-json", args->stats_json, "Write decode counts as JSON");
  cmd->add_option("--jobs,-j", args->jobs,
                  "Decoding threads (default: one per core for traces of 2 MiB of PT or more; 1: no parallel decoding)");
  cmd->add_option("--piece-bytes", args->piece_bytes,
                  "Parallel decoding: PT bytes per piece (default: from the trace size and --jobs)");
  cmd->add_option("--min-duration", args->min_duration,
                  "Leave out slices shorter than this (ns, us, ms, s; e.g. 1us): their time stays in the parent");
  cmd->add_option("--max-depth", args->max_depth, "Leave out slices nested deeper than this (1: outermost only)");
  cmd->add_flag("--summary", args->summary,
                "Print per function: calls, total/self time and instructions, p50/p90/p99/max latency, histogram");
  cmd->add_option("--function", args->function, "With --summary: list the slowest calls of this function");
  cmd->add_option("--slowest", args->slowest, "With --function: how many calls (default 10)");
  cmd->add_option("--top", args->top, "With --summary: functions listed (default 20)");
  cmd->add_flag("--json", args->json, "With --summary: print JSON (every function) instead of text");
  cmd->add_option("--window", args->window,
                  "T0..T1: decode only the PSB intervals covering these times (FTF ts units, e.g. "
                  "1234567890..1234600000; +1ms..+2ms from the trace's start; either end may be empty)");
  cmd->add_option("--window-offset", args->window_offset,
                  "A..B: decode only the PSB intervals covering these PT byte offsets of each stream file");
  cmd->add_option("--max-output-size", args->max_output_size,
                  "Largest FTF wanted (KB, MB, GB; e.g. 2MB): coarser detail over the trace, full detail at its end, "
                  "chosen to fit (decodes twice)");
  cmd->add_flag("--no-debuginfod", args->no_debuginfod,
                "Do not fetch missing debug files from the debuginfod servers in DEBUGINFOD_URLS");
  cmd->add_flag("--no-inline", args->no_inline,
                "No slices for inlined calls: a function's inlined code counts as its own (default: from DWARF, "
                "where the code file or its debug file has it)");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress output");
  cmd->add_flag("--progress", args->progress, "Progress on stderr even when it is not a terminal");
}

}  // namespace ptd::cli
