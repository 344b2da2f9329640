// `ptrace-direct export perf DIR -o perf.data`: a trace directory as a perf.data that
// `perf --buildid-dir <cache> script --itrace=b` decodes with perf's own decoder.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "perfdata/perf_exporter.h"

namespace ptd::cli {
namespace {

int RunExportPerf(const perfdata::PerfExportOptions& options) {
  absl::StatusOr<perfdata::PerfExportResult> result = perfdata::ExportPerfData(options);
  if (!result.ok()) return ReportError(result.status());
  std::printf("%s: %zu AUXTRACE buffers, %zu sideband records, %zu binaries in build-id cache %s\n",
              options.output.c_str(), result->aux_records, result->sideband_records,
              result->cached_binaries, result->buildid_dir.c_str());
  std::printf("decode with: perf --buildid-dir %s script -i %s --itrace=b\n", result->buildid_dir.c_str(),
              options.output.c_str());
  for (const std::string& note : result->notes) std::fprintf(stderr, "ptrace-direct: note: %s\n", note.c_str());
  return kExitOk;
}

}  // namespace

void RegisterExportCommand(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand("export", "Write a trace directory in another tool's format");
  cmd->require_subcommand(1);
  auto options = std::make_shared<perfdata::PerfExportOptions>();
  CLI::App* perf = cmd->add_subcommand("perf", "Write perf.data for `perf script --itrace=b`");
  perf->add_option("trace_dir", options->trace_dir, "trace directory")->required()->check(CLI::ExistingDirectory);
  perf->add_option("-o,--output", options->output, "perf.data to write")->required();
  perf->add_option("--buildid-dir", options->buildid_dir,
                   "build-id cache directory to fill with the vDSO and binaries (default: <output>.buildid)");
  perf->callback([&ctx, options]() { ctx.exit_code = RunExportPerf(*options); });
}

}  // namespace ptd::cli
