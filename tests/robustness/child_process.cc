#include "tests/robustness/child_process.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ptd::testing {
namespace {

std::string TempFile(const char* tag) {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ptd-" + tag + "-XXXXXX";
  int fd = mkstemp(tmpl.data());
  if (fd >= 0) close(fd);
  return tmpl;
}

// VmHWM of `pid` in KiB, 0 when unreadable (gone, or a zombie without memory).
long ReadVmHwmKb(pid_t pid) {
  absl::StatusOr<std::string> status = ReadFileToString("/proc/" + std::to_string(pid) + "/status");
  if (!status.ok()) return 0;
  const size_t at = status->find("VmHWM:");
  return at == std::string::npos ? 0 : std::atol(status->c_str() + at + 6);
}

double NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const ChildOptions& options)
    : out_path_(TempFile("out")), err_path_(TempFile("err")) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Closed by the exec: the constructor returns once the child runs the new program, so
  // no VmHWM sample sees the copy of this process the child was before.
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) return;
  pid_ = fork();
  if (pid_ != 0) {
    close(exec_pipe[1]);
    char byte;
    while (read(exec_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    close(exec_pipe[0]);
    return;
  }
  close(exec_pipe[0]);
  // Child: only async-signal-safe calls until exec.
  int in = open("/dev/null", O_RDONLY);
  int out = open(out_path_.c_str(), O_WRONLY | O_TRUNC);
  int err = open(err_path_.c_str(), O_WRONLY | O_TRUNC);
  if (in < 0 || out < 0 || err < 0) _exit(126);
  dup2(in, 0);
  dup2(out, 1);
  dup2(err, 2);
  if (options.file_size_limit) {
    signal(SIGXFSZ, SIG_IGN);  // kept across exec: writes past the limit fail with EFBIG
    rlimit limit{*options.file_size_limit, *options.file_size_limit};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(126);
  }
  if (options.uid) {
    if (setgroups(0, nullptr) != 0 || setgid(*options.uid) != 0 || setuid(*options.uid) != 0) {
      _exit(126);
    }
  }
  execv(args[0], args.data());
  _exit(127);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !waited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  unlink(out_path_.c_str());
  unlink(err_path_.c_str());
}

ChildResult ChildProcess::Wait(double hang_guard_s) {
  ChildResult result;
  if (pid_ <= 0 || waited_) return result;
  const double deadline = NowSeconds() + hang_guard_s;
  int status = 0;
  rusage usage{};
  for (;;) {
    result.peak_rss_kb = std::max(result.peak_rss_kb, ReadVmHwmKb(pid_));
    pid_t got = wait4(pid_, &status, WNOHANG, &usage);
    if (got == pid_) break;
    if (got < 0 && errno != EINTR) break;
    if (NowSeconds() > deadline) {
      result.hung = true;
      kill(pid_, SIGKILL);
      wait4(pid_, &status, 0, &usage);
      break;
    }
    usleep(10000);
  }
  waited_ = true;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (auto s = ReadFileToString(out_path_); s.ok()) result.out = *s;
  if (auto s = ReadFileToString(err_path_); s.ok()) result.err = *s;
  return result;
}

ChildResult RunChild(const std::vector<std::string>& argv, const ChildOptions& options) {
  ChildProcess child(argv, options);
  return child.Wait();
}

bool WaitForFile(const std::string& path, double limit_s) {
  const double deadline = NowSeconds() + limit_s;
  while (!PathExists(path)) {
    if (NowSeconds() > deadline) return false;
    usleep(10000);
  }
  return true;
}

bool ProcessRunning(int pid) {
  absl::StatusOr<std::string> stat = ReadFileToString(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return false;
  const size_t paren = stat->rfind(')');
  return paren == std::string::npos || paren + 2 >= stat->size() || (*stat)[paren + 2] != 'Z';
}

}  // namespace ptd::testing
