#pragma once
// Each subcommand lives in its own cmd_*.cc and registers itself on the CLI11 app.
// Commands store their exit status in CliContext; main() returns it.

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

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

void RegisterRecordCommand(CLI::App& app, CliContext& ctx);
void RegisterDecodeCommand(CLI::App& app, CliContext& ctx);
void RegisterInfoCommand(CLI::App& app, CliContext& ctx);
void RegisterImportCommand(CLI::App& app, CliContext& ctx);
void RegisterImportRawCommand(CLI::App& import_cmd, CliContext& ctx);
void RegisterImportPerfCommand(CLI::App& import_cmd, CliContext& ctx);
void RegisterExportCommand(CLI::App& app, CliContext& ctx);
void RegisterFtfDumpCommand(CLI::App& app, CliContext& ctx);

}  // namespace ptd::cli
