#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cli/command.h"
#include "common/file_util.h"
#include "decoder/trace_decoder.h"

namespace ptd::cli {

namespace {

struct DecodeArgs {
  std::string input;
  std::string output;
  std::string time_axis = "time";
  std::string decoder = "block";
  int tid = -1;
  std::string time_range;
  std::string stats_json;
  bool quiet = false;
};

absl::Status RunDecode(const DecodeArgs& args) {
  decoder::DecodeOptions options;
  if (args.decoder == "block") {
    options.decoder = decoder::DecoderKind::kBlock;
  } else if (args.decoder == "insn") {
    options.decoder = decoder::DecoderKind::kInsn;
  } else {
    return absl::InvalidArgumentError("--decoder must be block or insn");
  }
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
  options.progress = !args.quiet && ::isatty(2);
  absl::StatusOr<decoder::DecodeResult> result = decoder::DecodeTraceToFtf(args.input, args.output, options);
  if (!result.ok()) return result.status();
  for (const std::string& w : result->warnings) std::fprintf(stderr, "ptrace-direct: warning: %s\n", w.c_str());
  const decoder::DecodeStats& s = result->stats;
  std::fprintf(stderr,
               "decoded %llu instructions, %llu calls, %llu returns, %llu errors, %llu overflows, "
               "%llu threads in %.3f s → %s\n",
               static_cast<unsigned long long>(s.instructions), static_cast<unsigned long long>(s.calls),
               static_cast<unsigned long long>(s.returns), static_cast<unsigned long long>(s.errors),
               static_cast<unsigned long long>(s.overflows), static_cast<unsigned long long>(s.threads), s.seconds,
               args.output.c_str());
  if (!args.stats_json.empty()) {
    absl::Status w = WriteFileAtomic(args.stats_json, decoder::DecodeStatsJson(s));
    if (!w.ok()) return w;
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterDecodeCommand(CLI::App& app, CliContext& ctx) {
  auto args = std::make_shared<DecodeArgs>();
  CLI::App* cmd = app.add_subcommand("decode", "Decode a trace directory into per-thread call stacks (FTF)");
  cmd->add_option("input", args->input, "Trace directory")->required();
  cmd->add_option("--output,-o", args->output, "Output .ftf or .ftf.gz")->required();
  cmd->add_option("--time-axis", args->time_axis, "time, cycles or instructions (default time)");
  cmd->add_option("--decoder", args->decoder, "block (default, fast) or insn (reference)");
  cmd->add_option("--tid", args->tid, "Only this thread");
  cmd->add_option("--time-range", args->time_range, "BEGIN:END, keep slices that begin inside (output time units)");
  cmd->add_option("--stats-json", args->stats_json, "Write decode counts as JSON");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress output");
  cmd->callback([&ctx, args]() {
    absl::Status s = RunDecode(*args);
    if (!s.ok()) ctx.exit_code = ReportError(s);
  });
}

}  // namespace ptd::cli
