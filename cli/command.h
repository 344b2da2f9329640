#pragma once
// Each subcommand lives in its own cmd_*.cc and registers itself on the CLI11 app.
// Commands store their exit status in CliContext; main() returns it.

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "common/missing_binaries.h"

namespace ptd::cli {

// Exit codes: 0 success, 1 failure while running, 2 usage or configuration error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct CliContext {
  int exit_code = kExitOk;
};

// Prints "ptrace-direct: <message>" on stderr and returns the exit code for `status`
// (kExitUsage for InvalidArgument/FailedPrecondition/Unimplemented, else kExitFailure).
int ReportError(const absl::Status& status);

// One warning for every binary the trace needs and this machine lacks: the count, the
// biggest, and where to add them; `verbose` lists each (decode/import/info --verbose).
// `decode_errors` < 0: nothing was decoded (import, info). `buildid_dirs`: where a
// perf.data's binaries were looked for, named with how to add one.
void WarnMissingBinaries(const MissingBinaries& missing, int64_t decode_errors, bool verbose,
                         const std::vector<std::string>& buildid_dirs = {});

// Adds subcommand `name` to `parent`, its options to be bound to a new Args (which the
// callback keeps alive), and returns both. When the subcommand is given, `run(args)` runs:
// an int it returns is the exit code; an absl::Status that is not OK is reported.
template <typename Args, typename Run>
std::pair<CLI::App*, Args*> AddSubcommand(CLI::App& parent, CliContext& ctx, const std::string& name,
                                          const std::string& description, Run run) {
  auto args = std::make_shared<Args>();
  CLI::App* cmd = parent.add_subcommand(name, description);
  cmd->callback([&ctx, args, run]() {
    if constexpr (std::is_same_v<decltype(run(*args)), int>) {
      ctx.exit_code = run(*args);
    } else {
      absl::Status status = run(*args);
      if (!status.ok()) ctx.exit_code = ReportError(status);
    }
  });
  return {cmd, args.get()};
}

// The options of the commands that look binaries up (decode, info, import perf): where a
// perf.data's binaries are searched, and whether each missing one is listed.
void AddMissingBinaryOptions(CLI::App* cmd, std::vector<std::string>* buildid_dirs, bool* verbose);

void RegisterRecordCommand(CLI::App& app, CliContext& ctx);
void RegisterDecodeCommand(CLI::App& app, CliContext& ctx);
void RegisterInfoCommand(CLI::App& app, CliContext& ctx);
void RegisterImportCommand(CLI::App& app, CliContext& ctx);
void RegisterImportRawCommand(CLI::App& import_cmd, CliContext& ctx);
void RegisterImportPerfCommand(CLI::App& import_cmd, CliContext& ctx);
void RegisterExportCommand(CLI::App& app, CliContext& ctx);
void RegisterFtfDumpCommand(CLI::App& app, CliContext& ctx);
void RegisterDiffCommand(CLI::App& app, CliContext& ctx);
void RegisterCoverageCommand(CLI::App& app, CliContext& ctx);

}  // namespace ptd::cli
