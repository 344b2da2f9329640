#pragma once
// Runs a program for the robustness tests with what RunCommand cannot set: a file size
// limit (RLIMIT_FSIZE with SIGXFSZ ignored, so writes past it fail with EFBIG as on a
// full disk), another user id, and a pid to signal while it runs. Reports the peak RSS
// of the program, sampled from /proc/PID/status VmHWM while it runs (wait4's ru_maxrss
// would include the RSS of this test process, which the child had before its exec).

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ptd::testing {

struct ChildOptions {
  std::optional<uint64_t> file_size_limit;  // bytes; RLIMIT_FSIZE
  std::optional<uid_t> uid;                 // setgid/setuid before exec (needs root)
};

struct ChildResult {
  int exit_code = -1;     // exit status, or 128+signal
  std::string out;
  std::string err;
  long peak_rss_kb = 0;   // highest VmHWM seen (sampled every 10 ms)
  bool hung = false;      // killed after the hang guard
};

class ChildProcess {
 public:
  // Starts argv[0] (a path); stdin is /dev/null, stdout/stderr are captured.
  ChildProcess(const std::vector<std::string>& argv, const ChildOptions& options = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Waits for the end; after `hang_guard_s` the child is killed and `hung` set (a guard
  // against a hanging test, not a speed check).
  ChildResult Wait(double hang_guard_s = 120);

 private:
  pid_t pid_ = -1;
  std::string out_path_;
  std::string err_path_;
  bool waited_ = false;
};

// Convenience: start and wait.
ChildResult RunChild(const std::vector<std::string>& argv, const ChildOptions& options = {});

// True while process `pid` exists and is not a zombie.
bool ProcessRunning(int pid);

// Polls until `path` exists (true) or `limit_s` passed (false): a hang guard.
bool WaitForFile(const std::string& path, double limit_s = 60);

}  // namespace ptd::testing
