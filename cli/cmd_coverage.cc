// `ptrace-direct coverage TRACE -o FILE`: which code the trace executed
// (decoder/coverage/collector.h), as drcov (lighthouse, bncov), lcov (genhtml) or a text
// summary.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "common/file_util.h"
#include "decoder/coverage/collector.h"
#include "decoder/coverage/drcov.h"
#include "decoder/coverage/lcov.h"
#include "decoder/coverage/text.h"
#include "decoder/trace_decoder.h"
#include "perfdata/perf_data_input.h"

namespace ptd::cli {
namespace {

struct CoverageArgs {
  std::string input;
  std::string output;
  std::string format = "drcov";
  std::string decoder = "fast";
  int jobs = 0;              // 0: one per core (as decode's)
  uint64_t piece_bytes = 0;  // 0: automatic
  std::vector<std::string> buildid_dirs;
  bool verbose = false;
  bool quiet = false;
};

absl::Status RunCoverage(const CoverageArgs& args) {
  if (args.format != "drcov" && args.format != "lcov" && args.format != "text") {
    return absl::InvalidArgumentError(absl::StrCat("--format '", args.format, "': drcov, lcov or text"));
  }
  absl::StatusOr<perfdata::DecodeInput> input = perfdata::DecodeInput::Open(args.input, args.buildid_dirs);
  if (!input.ok()) return input.status();
  decoder::CoverageCollector coverage;
  decoder::DecodeOptions options;
  absl::StatusOr<decoder::DecoderKind> kind = decoder::ParseDecoderKind(args.decoder);
  if (!kind.ok()) return kind.status();
  options.decoder = *kind;
  if (args.jobs < 0) return absl::InvalidArgumentError("--jobs must be 1 or more (0: one per core)");
  options.jobs = args.jobs;
  options.piece_bytes = args.piece_bytes;
  options.coverage = &coverage;
  options.progress = !args.quiet;
  options.progress_label = "coverage";
  absl::StatusOr<decoder::DecodeResult> result = decoder::DecodeTraceToFtf(input->trace_dir(), "", options);
  if (!result.ok()) return result.status();
  for (const std::string& w : result->warnings) std::fprintf(stderr, "ptrace-direct: warning: %s\n", w.c_str());
  MissingBinaries missing = result->missing_binaries;
  const perfdata::TemporaryPerfImport* perf_import = input->perf_import();
  if (perf_import != nullptr) missing.Add(perf_import->missing_binaries());
  const decoder::Stats& s = result->stats;
  WarnMissingBinaries(missing, static_cast<int64_t>(s[decoder::Stat::kErrors]), args.verbose,
                      perf_import != nullptr ? perf_import->buildid_dirs() : std::vector<std::string>{});
  std::vector<std::string> notes;
  const std::string text = args.format == "drcov"  ? decoder::CoverageDrcov(coverage)
                           : args.format == "lcov" ? decoder::CoverageLcov(coverage, &notes)
                                                   : decoder::CoverageText(coverage);
  if (args.verbose) {
    for (const std::string& n : notes) std::fprintf(stderr, "ptrace-direct: %s\n", n.c_str());
  }
  if (absl::Status written = WriteFileAtomic(args.output, text); !written.ok()) return written;
  if (!args.quiet) {
    std::fprintf(stderr, "%zu blocks in %zu modules executed (%llu instructions, %llu decode errors) → %s\n",
                 coverage.Blocks().size(), coverage.modules().size(),
                 static_cast<unsigned long long>(s[decoder::Stat::kInstructions]),
                 static_cast<unsigned long long>(s[decoder::Stat::kErrors]), args.output.c_str());
  }
  if (coverage.unresolved_runs() > 0) {
    std::fprintf(stderr, "ptrace-direct: warning: %llu instruction runs could not be walked in their code: not counted\n",
                 static_cast<unsigned long long>(coverage.unresolved_runs()));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterCoverageCommand(CLI::App& app, CliContext& ctx) {
  auto [cmd, args] = AddSubcommand<CoverageArgs>(
      app, ctx, "coverage", "The code a trace executed: drcov (lighthouse), lcov (genhtml; DWARF lines) or text",
      RunCoverage);
  cmd->add_option("trace", args->input, "Trace directory or perf.data")->required();
  cmd->add_option("-o,--output", args->output, "File to write")->required();
  cmd->add_option("--format", args->format, "drcov (default: module table and basic blocks), lcov (source lines) or text");
  cmd->add_option("--decoder", args->decoder, "fast (default), libipt-block or libipt-insn: as decode's");
  cmd->add_option("--jobs,-j", args->jobs,
                  "Decoding threads, as decode's (default: one per core for traces of 2 MiB of PT or more; "
                  "--decoder libipt-block: one); the output is the same for any number");
  cmd->add_option("--piece-bytes", args->piece_bytes,
                  "Parallel decoding: PT bytes per piece (default: from the trace size and --jobs)");
  cmd->add_flag("-q,--quiet", args->quiet, "No progress bar or summary line");
  AddMissingBinaryOptions(cmd, &args->buildid_dirs, &args->verbose);
}

}  // namespace ptd::cli
