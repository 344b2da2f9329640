#include "cli/command.h"

namespace ptd::cli {

void RegisterImportCommand(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand("import", "Build a trace directory from another tool's trace");
  cmd->require_subcommand(1);
  CLI::App* raw = cmd->add_subcommand("raw", "Raw PT bytes plus memory images");
  raw->callback([&ctx]() {
    ctx.exit_code = ReportError(absl::UnimplementedError("import raw: not built yet"));
  });
}

}  // namespace ptd::cli
