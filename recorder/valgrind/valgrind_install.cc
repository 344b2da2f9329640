#include "recorder/valgrind/valgrind_install.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace ptd {
namespace {

std::string SelfDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return Dirname(path);
}

bool IsExecutableFile(const std::string& path) { return access(path.c_str(), X_OK) == 0 && !IsDirectory(path); }

}  // namespace

absl::StatusOr<ValgrindInstall> FindValgrind() {
  ValgrindInstall install;
  const char* path_env = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path_env != nullptr ? path_env : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/valgrind");
    if (IsExecutableFile(candidate)) {
      install.launcher = candidate;
      break;
    }
  }
  if (install.launcher.empty()) {
    return absl::FailedPreconditionError(
        "valgrind is not installed (Debian/Ubuntu: apt-get install valgrind); "
        "or record with --emulate=ptrace (slower: single-steps the program)");
  }
  for (const char* dir : {"/usr/libexec/valgrind", "/usr/lib/x86_64-linux-gnu/valgrind", "/usr/lib/valgrind",
                          "/usr/local/libexec/valgrind", "/usr/local/lib/valgrind"}) {
    if (PathExists(absl::StrCat(dir, "/vgpreload_core-amd64-linux.so"))) {
      install.lib_dir = dir;
      break;
    }
  }
  if (install.lib_dir.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        install.launcher, " found, but not its library directory (vgpreload_core-amd64-linux.so in "
        "/usr/libexec/valgrind or /usr/lib/valgrind); reinstall valgrind, or record with --emulate=ptrace"));
  }
  std::vector<std::string> candidates;
  if (const char* env = getenv("PTD_VALGRIND_TOOL"); env != nullptr && *env != '\0') candidates.push_back(env);
  const std::string self = SelfDir();
  if (!self.empty()) {
    candidates.push_back(absl::StrCat(self, "/", kValgrindToolFile));
    candidates.push_back(absl::StrCat(self, "/../libexec/ptrace-direct/", kValgrindToolFile));
  }
#ifdef PTD_VALGRIND_TOOL_BUILD_DIR
  candidates.push_back(absl::StrCat(PTD_VALGRIND_TOOL_BUILD_DIR, "/", kValgrindToolFile));
#endif
#ifdef PTD_VALGRIND_TOOL_INSTALL_DIR
  candidates.push_back(absl::StrCat(PTD_VALGRIND_TOOL_INSTALL_DIR, "/", kValgrindToolFile));
#endif
  for (const std::string& c : candidates) {
    if (IsExecutableFile(c)) {
      install.tool = c;
      return install;
    }
  }
  std::string looked;
  for (const std::string& c : candidates) absl::StrAppend(&looked, looked.empty() ? "" : ", ", c);
  return absl::FailedPreconditionError(absl::StrCat(
      "ptrace-direct's Valgrind tool (", kValgrindToolFile, ") was not found (looked at ", looked,
      "); build it (cmake --build build --target ptdtrace) or set PTD_VALGRIND_TOOL, "
      "or record with --emulate=ptrace"));
}

absl::Status MakeValgrindLibDir(const ValgrindInstall& install, const std::string& dir) {
  DIR* d = opendir(install.lib_dir.c_str());
  if (d == nullptr) return ErrnoError("cannot list", install.lib_dir, errno);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string target = absl::StrCat(install.lib_dir, "/", name);
    const std::string link = absl::StrCat(dir, "/", name);
    if (symlink(target.c_str(), link.c_str()) != 0) {
      closedir(d);
      return ErrnoError("cannot create link", link, errno);
    }
  }
  closedir(d);
  const std::string link = absl::StrCat(dir, "/", kValgrindToolFile);
  if (symlink(install.tool.c_str(), link.c_str()) != 0) return ErrnoError("cannot create link", link, errno);
  return absl::OkStatus();
}

absl::StatusOr<std::string> SharedValgrindLibDir(const ValgrindInstall& install, const std::string& cache_dir) {
  std::error_code error;
  const std::string root = std::filesystem::absolute(cache_dir, error).lexically_normal().string();
  if (error) return absl::InvalidArgumentError(absl::StrCat(cache_dir, ": ", error.message()));
  const uint64_t key = std::hash<std::string>{}(absl::StrCat(install.lib_dir, "\n", install.tool));
  const std::string dir = absl::StrCat(root, "/valgrind-lib/", absl::StrFormat("%016x", key));
  if (IsDirectory(dir)) return dir;
  // Made under a private name and renamed into place: a recording running at the same
  // time sees the whole directory or none.
  const std::string building = absl::StrCat(dir, ".", getpid(), ".tmp");
  (void)RemoveTree(building);
  if (absl::Status s = MakeDirs(building); !s.ok()) return s;
  if (absl::Status s = MakeValgrindLibDir(install, building); !s.ok()) {
    (void)RemoveTree(building);
    return s;
  }
  if (rename(building.c_str(), dir.c_str()) != 0) {
    const int err = errno;
    (void)RemoveTree(building);
    if (!IsDirectory(dir)) return ErrnoError("cannot create", dir, err);
  }
  return dir;
}

std::vector<std::string> ValgrindCommand(const ValgrindInstall& install, const ValgrindRunOptions& options,
                                         const std::vector<std::string>& command) {
  std::vector<std::string> argv = {
      install.launcher,
      absl::StrCat("--tool=", kValgrindToolName),
      absl::StrCat("--ptd-out=", options.out_dir),
      "-q",
      absl::StrCat("--log-file=", options.log_file),
      // A superblock then ends at its first control transfer: the tool describes
      // straight-line blocks whose exit the next block tells.
      "--vex-guest-chase=no",
      // and VEX does not unroll small loops into one block (which would hide where an
      // iteration left).
      "--vex-iropt-unroll-thresh=0",
      // Code rewritten in memory no file backs (JIT code) is translated again, so the
      // tool sees (and captures) its new bytes. Valgrind's default on amd64; said here
      // because JIT capture depends on it.
      "--smc-check=all-non-file",
      // Valgrind's clean-up code at exit is not the program's.
      "--run-libc-freeres=no",
      "--run-cxx-freeres=no",
      absl::StrCat("--trace-children=", options.follow_children ? "yes" : "no"),
      absl::StrCat("--ptd-follow-forks=", options.follow_children ? "yes" : "no"),
  };
  if (options.recorder_pid > 0) argv.push_back(absl::StrCat("--ptd-recorder-pid=", options.recorder_pid));
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace ptd
