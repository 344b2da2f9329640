#pragma once
// Each subcommand lives in its own cmd_*.cc and registers itself on the CLI11 app.
// Commands store their exit status in CliContext; main() returns it.

#include <string>
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

void RegisterRecordCommand(CLI::App& app, CliContext& ctx);
void RegisterDecodeCommand(CLI::App& app, CliContext& ctx);
void RegisterInfoCommand(CLI::App& app, CliContext& ctx);
void RegisterImportCommand(CLI::App& app, CliContext& ctx);
void RegisterImportRawCommand(CLI::App& import_cmd, CliContext& ctx);
void RegisterImportPerfCommand(CLI::App& import_cmd, CliContext& ctx);
void RegisterExportCommand(CLI::App& app, CliContext& ctx);
void RegisterFtfDumpCommand(CLI::App& app, CliContext& ctx);

}  // namespace ptd::cli
