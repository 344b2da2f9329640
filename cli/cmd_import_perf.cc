// `ptrace-direct import perf perf.data -o DIR`: a perf.data recorded with intel_pt
// (file or pipe mode) becomes a trace directory that decode and info read.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "cli/command.h"
#include "common/progress_bar.h"
#include "perfdata/build_id_cache.h"
#include "perfdata/perf_data_reader.h"
#include "perfdata/perf_importer.h"

namespace ptd::cli {
namespace {

struct ImportPerfArgs {
  std::string input;
  std::string output;
  bool force = false;
  bool verbose = false;
  std::vector<std::string> buildid_dirs;
};

int RunImportPerf(const ImportPerfArgs& args) {
  absl::StatusOr<perfdata::PerfData> data = perfdata::PerfDataReader::ReadFile(args.input);
  if (!data.ok()) return ReportError(data.status());
  perfdata::PerfImportOptions options;
  options.out_dir = args.output;
  options.force = args.force;
  options.buildid_dirs = args.buildid_dirs;
  for (const std::string& d : perfdata::BuildIdCache::DefaultDirs()) options.buildid_dirs.push_back(d);
  uint64_t total = 0;
  for (const perfdata::AuxtraceBuffer& b : data->aux_buffers) total += b.size;
  ProgressBar progress("importing", total, ProgressBar::StderrIsTerminal());
  options.progress = [&progress](uint64_t done) { progress.Update(done); };
  absl::StatusOr<perfdata::PerfImportResult> result = perfdata::ImportPerfData(*data, options);
  progress.Finish(result.ok());
  if (!result.ok()) return ReportError(result.status());
  uint64_t pt_bytes = 0;
  size_t chunks = 0;
  for (const PtStream& s : result->meta.streams) {
    chunks += s.chunks.size();
    for (const PtChunk& c : s.chunks) pt_bytes += c.size;
  }
  std::printf("%s: %zu PT streams (%zu chunks, %llu bytes), %zu sideband files, %zu images\n",
              args.output.c_str(), result->meta.streams.size(), chunks,
              static_cast<unsigned long long>(pt_bytes), result->meta.sideband.size(),
              result->meta.images.size());
  WarnMissingBinaries(result->missing_binaries, -1, args.verbose, options.buildid_dirs);
  return kExitOk;
}

}  // namespace

void RegisterImportPerfCommand(CLI::App& import_cmd, CliContext& ctx) {
  auto [perf, args] = AddSubcommand<ImportPerfArgs>(
      import_cmd, ctx, "perf", "A perf.data recorded with `perf record -e intel_pt//` (file or pipe mode)",
      RunImportPerf);
  perf->add_option("perf_data", args->input, "perf.data file")->required()->check(CLI::ExistingFile);
  perf->add_option("-o,--output", args->output, "trace directory to create")->required();
  perf->add_flag("-f,--force", args->force, "replace an existing output directory");
  AddMissingBinaryOptions(perf, &args->buildid_dirs, &args->verbose);
}

}  // namespace ptd::cli
