#include "cli/command.h"

namespace ptd::cli {

void RegisterExportCommand(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand("export", "Write a trace directory in another tool's format");
  cmd->require_subcommand(1);
  CLI::App* perf = cmd->add_subcommand("perf", "Write perf.data for perf script");
  perf->callback([&ctx]() {
    ctx.exit_code = ReportError(absl::UnimplementedError("export perf: not built yet"));
  });
}

}  // namespace ptd::cli
