#include "cli/command.h"

namespace ptd::cli {

void RegisterImportPerfCommand(CLI::App& import_cmd, CliContext& ctx) {
  CLI::App* perf = import_cmd.add_subcommand("perf", "A perf.data recorded with intel_pt");
  perf->callback([&ctx]() {
    ctx.exit_code = ReportError(absl::UnimplementedError("import perf: not built yet"));
  });
}

}  // namespace ptd::cli
