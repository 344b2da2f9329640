#include <cstdio>

#include "cli/command.h"
#include "common/trace_meta.h"

namespace ptd::cli {

void RegisterInfoCommand(CLI::App& app, CliContext& ctx) {
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("info", "Summarize a trace directory");
  cmd->add_option("trace_dir", *dir, "Trace directory")->required();
  cmd->callback([&ctx, dir]() {
    absl::StatusOr<TraceMeta> meta = ReadTraceMeta(*dir);
    if (!meta.ok()) {
      ctx.exit_code = ReportError(meta.status());
      return;
    }
    std::printf("mode: %s\n", TraceModeName(meta->mode));
  });
}

}  // namespace ptd::cli
