#include "cli/command.h"

namespace ptd::cli {

void RegisterDecodeCommand(CLI::App& app, CliContext& ctx) {
  auto input = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("decode", "Decode a trace directory into per-thread call stacks (FTF)");
  cmd->add_option("input", *input, "Trace directory")->required();
  cmd->add_option("--output,-o", *output, "Output .ftf or .ftf.gz")->required();
  cmd->callback([&ctx]() {
    ctx.exit_code = ReportError(absl::UnimplementedError("decode: not built yet"));
  });
}

}  // namespace ptd::cli
