#pragma once
// Finding Valgrind and ptrace-direct's Valgrind tool, and the command that runs a
// program under it. Valgrind's launcher looks for tool NAME as $VALGRIND_LIB/NAME-<arch>
// next to its preload libraries and suppressions, so a recording makes a directory of
// links to Valgrind's own files plus the tool and points VALGRIND_LIB at it: the user
// sets nothing.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ptd {

inline constexpr char kValgrindToolName[] = "ptdtrace";
inline constexpr char kValgrindToolFile[] = "ptdtrace-amd64-linux";

struct ValgrindInstall {
  std::string launcher;  // the valgrind command
  std::string lib_dir;   // Valgrind's tools and vgpreload_*.so
  std::string tool;      // our ptdtrace-amd64-linux
};

// Looks for valgrind on PATH, its library directory and our tool: $PTD_VALGRIND_TOOL,
// next to the running binary, ../libexec/ptrace-direct/ from it, then where the build
// and the install put it. FailedPrecondition says what is missing and what to do.
absl::StatusOr<ValgrindInstall> FindValgrind();

// Fills `dir` (existing, empty) with links to Valgrind's files and to our tool.
absl::Status MakeValgrindLibDir(const ValgrindInstall& install, const std::string& dir);

// The absolute path of a directory of those links under `cache_dir` (one per Valgrind
// library directory and tool path, made once and shared by recordings): a program that
// outlives its recording still finds Valgrind there at its next exec, so nothing of the
// recording is left beside the trace.
absl::StatusOr<std::string> SharedValgrindLibDir(const ValgrindInstall& install, const std::string& cache_dir);

struct ValgrindRunOptions {
  std::string out_dir;          // where the tool writes its stream files
  // Where Valgrind writes its own messages, one file per process (`%p` is the pid), so
  // they never mix with the program's stderr; absolute.
  std::string log_file;
  bool follow_children = true;  // --trace-children
  // The recorder: once it is gone (killed), the tool stops tracing and removes its stream
  // files instead of filling the disk with what nobody reads.
  int recorder_pid = 0;
};

// argv for running `command` under our tool.
std::vector<std::string> ValgrindCommand(const ValgrindInstall& install, const ValgrindRunOptions& options,
                                         const std::vector<std::string>& command);

}  // namespace ptd
