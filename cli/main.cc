#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "cli/command.h"
#include "ptd/version.h"

namespace ptd::cli {

int ReportError(const absl::Status& status) {
  std::fprintf(stderr, "ptrace-direct: %s\n", std::string(status.message()).c_str());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnimplemented:
      return kExitUsage;
    default:
      return kExitFailure;
  }
}

void WarnMissingBinaries(const MissingBinaries& missing, int64_t decode_errors, bool verbose,
                         const std::vector<std::string>& buildid_dirs) {
  if (missing.empty()) return;
  std::fprintf(stderr, "ptrace-direct: warning: %s\n", missing.Summary(decode_errors, verbose).c_str());
  if (!buildid_dirs.empty()) {
    std::fprintf(stderr, "ptrace-direct: build-id dirs searched: %s (add one with --buildid-dir)\n",
                 absl::StrJoin(buildid_dirs, ", ").c_str());
  }
}

void AddMissingBinaryOptions(CLI::App* cmd, std::vector<std::string>* buildid_dirs, bool* verbose) {
  cmd->add_option("--buildid-dir", *buildid_dirs,
                  "perf.data input: build-id cache searched for binaries (repeatable; then ~/.debug)");
  cmd->add_flag("--verbose,-v", *verbose, "List every missing binary (default: how many, and the biggest)");
}

}  // namespace ptd::cli

int main(int argc, char** argv) {
  using namespace ptd::cli;
  CLI::App app{
      "ptrace-direct: record Intel Processor Trace with perf_event_open and decode it into\n"
      "per-thread call stacks (Fuchsia Trace Format, for Perfetto)."};
  app.name("ptrace-direct");
  app.set_version_flag("--version", std::string("ptrace-direct ") + ptd::kToolVersion);
  app.require_subcommand(1);
  CliContext ctx;
  RegisterRecordCommand(app, ctx);
  RegisterDecodeCommand(app, ctx);
  RegisterInfoCommand(app, ctx);
  RegisterImportCommand(app, ctx);
  RegisterExportCommand(app, ctx);
  RegisterFtfDumpCommand(app, ctx);
  RegisterDiffCommand(app, ctx);
  RegisterCoverageCommand(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help, version or the error with usage
    return code == 0 ? kExitOk : kExitUsage;
  }
  return ctx.exit_code;
}
