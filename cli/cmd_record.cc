#include "cli/command.h"
#include "recorder/record_options.h"

namespace ptd::cli {

void RegisterRecordCommand(CLI::App& app, CliContext& ctx) {
  auto opts = std::make_shared<RecordOptions>();
  CLI::App* cmd = app.add_subcommand("record", "Record a trace of a process into a trace directory");
  cmd->add_option("--pid,-p", opts->pid, "Attach to this running process");
  cmd->add_option("--output,-o", opts->output_dir, "Trace directory to write")->capture_default_str();
  cmd->add_flag("--force", opts->force, "Replace an existing output directory");
  cmd->add_flag("--emulate", opts->emulate, "Use the ptrace emulation backend (no PT hardware)");
  cmd->add_option("command", opts->command, "Command to launch (after --)");
  cmd->callback([&ctx, opts]() {
    ctx.exit_code = ReportError(absl::UnimplementedError("record: not built yet"));
  });
}

}  // namespace ptd::cli
