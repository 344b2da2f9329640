#include "cli/command.h"

namespace ptd::cli {

void RegisterImportRawCommand(CLI::App& import_cmd, CliContext& ctx) {
  CLI::App* raw = import_cmd.add_subcommand("raw", "Raw PT bytes plus memory images");
  raw->callback([&ctx]() {
    ctx.exit_code = ReportError(absl::UnimplementedError("import raw: not built yet"));
  });
}

}  // namespace ptd::cli
