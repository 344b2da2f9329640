#include "cli/command.h"

namespace ptd::cli {

void RegisterFtfDumpCommand(CLI::App& app, CliContext& ctx) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("ftf-dump", "Print an FTF file's records and a summary");
  cmd->add_option("file", *file, "FTF file (.ftf or .ftf.gz)")->required();
  cmd->callback([&ctx]() {
    ctx.exit_code = ReportError(absl::UnimplementedError("ftf-dump: not built yet"));
  });
}

}  // namespace ptd::cli
