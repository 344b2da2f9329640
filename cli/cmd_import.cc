#include "cli/command.h"

namespace ptd::cli {

void RegisterImportCommand(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand("import", "Build a trace directory from another tool's trace");
  cmd->require_subcommand(1);
  RegisterImportRawCommand(*cmd, ctx);
  RegisterImportPerfCommand(*cmd, ctx);
}

}  // namespace ptd::cli
