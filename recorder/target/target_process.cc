#include "recorder/target/target_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "recorder/target/launch_signals.h"
#include "recorder/sideband/proc_synth.h"

extern char** environ;

namespace ptd {

// The child of fork() in a multi-threaded parent may only make async-signal-safe calls,
// so PATH is searched here, before the fork.
absl::StatusOr<std::string> ResolveExecutable(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("empty command");
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) != 0) return ErrnoError("cannot execute", name, errno);
    return name;
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    absl::string_view dir = absl::string_view(path).substr(begin, end - begin);
    std::string candidate = absl::StrCat(dir.empty() ? absl::string_view(".") : dir, "/", name);
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    begin = end + 1;
  }
  return absl::NotFoundError(absl::StrCat(name, ": command not found in PATH"));
}

namespace {

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

int WaitPidNoEintr(int pid, int* status, int flags) {
  int rc;
  do {
    rc = ::waitpid(pid, status, flags);
  } while (rc < 0 && errno == EINTR);
  return rc;
}

}  // namespace

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  std::string name = "SIG";
  if (abbrev != nullptr) {
    name.append(abbrev);
  } else {
    name.append(std::to_string(signal));
  }
  return name;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by ", SignalName(WTERMSIG(status)));
  if (WIFSTOPPED(status)) return absl::StrCat("stopped by ", SignalName(WSTOPSIG(status)));
  return absl::StrCat("wait status 0x", absl::Hex(status));
}

int TerminateChild(int pid, double grace_s) {
  int status = 0;
  ::kill(pid, SIGTERM);
  for (double waited = 0; waited < grace_s; waited += 0.01) {
    const int rc = WaitPidNoEintr(pid, &status, WNOHANG);
    if (rc < 0) return -1;  // not our child (any more)
    if (rc == pid && (WIFEXITED(status) || WIFSIGNALED(status))) return status;
    if (rc == pid) break;  // a ptrace stop: it cannot act on SIGTERM until we resume it
    ::usleep(10000);
  }
  ::kill(pid, SIGKILL);
  while (WaitPidNoEintr(pid, &status, 0) == pid && !WIFEXITED(status) && !WIFSIGNALED(status)) {
  }
  return status;
}

int ShellExitCode(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

absl::Status PtraceAttachError(int errno_value, int pid, int tid) {
  const std::string what = tid == pid ? absl::StrCat("process ", pid)
                                      : absl::StrCat("thread ", tid, " of process ", pid);
  switch (errno_value) {
    case EPERM:
    case EACCES:
      return absl::PermissionDeniedError(absl::StrCat(
          "ptrace(PTRACE_ATTACH) of ", what, ": ", std::strerror(errno_value),
          ": it may already be traced (a debugger, strace), belong to another user, or be "
          "protected: run as its owner or with CAP_SYS_PTRACE (e.g. as root), and check "
          "/proc/sys/kernel/yama/ptrace_scope (0 or 1 lets a user trace its own processes)"));
    case ESRCH:
      return absl::NotFoundError(
          absl::StrCat("ptrace(PTRACE_ATTACH) of ", what, ": it exited during the attach"));
    default:
      return ErrnoError("ptrace(PTRACE_ATTACH)", what, errno_value);
  }
}

bool IsZombie(int pid) {
  absl::StatusOr<std::string> stat = ReadFileToString(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return false;
  // "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
  const size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() &&
         ((*stat)[paren + 2] == 'Z' || (*stat)[paren + 2] == 'X');
}

absl::StatusOr<TargetProcess> TargetProcess::Launch(const LaunchOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no command to launch");
  absl::StatusOr<std::string> exe = ResolveExecutable(options.argv[0]);
  if (!exe.ok()) return exe.status();

  // Everything the child needs is prepared before fork().
  std::vector<char*> args;
  for (const std::string& a : options.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  int go[2];
  int exec_error[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return ErrnoError("pipe", "launch", errno);
  if (::pipe2(exec_error, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(go[0]);
    ::close(go[1]);
    return ErrnoError("pipe", "launch", err);
  }
  const int parent_pid = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {go[0], go[1], exec_error[0], exec_error[1]}) ::close(fd);
    return ErrnoError("fork", options.argv[0], err);
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    ::close(go[1]);
    ::close(exec_error[0]);
    if (options.kill_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent_pid) ::_exit(127);
    }
    char byte;
    ssize_t n;
    do {
      n = ::read(go[0], &byte, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) ::_exit(127);  // the recorder gave up before releasing us
    RestoreStartupSignalState();
    ::execve(exe->c_str(), args.data(), environ);
    int err = errno;
    (void)!::write(exec_error[1], &err, sizeof(err));
    ::_exit(127);
  }
  ::close(go[0]);
  ::close(exec_error[1]);
  TargetProcess target;
  target.pid_ = pid;
  target.launched_ = true;
  target.stop_at_exec_ = options.stop_at_exec;
  target.go_fd_ = go[1];
  target.exec_error_fd_ = exec_error[0];
  target.argv_ = options.argv;
  return target;
}

absl::StatusOr<TargetProcess> TargetProcess::Attach(int pid) {
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("invalid pid ", pid));
  if (!IsDirectory(absl::StrCat("/proc/", pid))) {
    return absl::NotFoundError(absl::StrCat("no process with pid ", pid));
  }
  if (IsZombie(pid)) {
    return absl::NotFoundError(
        absl::StrCat("process ", pid, " has exited (a zombie waiting for its parent): nothing to record"));
  }
  TargetProcess target;
  target.pid_ = pid;
  if (auto cmdline = ReadFileToString(absl::StrCat("/proc/", pid, "/cmdline")); cmdline.ok()) {
    for (absl::string_view arg : absl::StrSplit(*cmdline, '\0', absl::SkipEmpty())) {
      target.argv_.emplace_back(arg);
    }
  }
  return target;
}

TargetProcess::TargetProcess(TargetProcess&& other) noexcept { *this = std::move(other); }

TargetProcess& TargetProcess::operator=(TargetProcess&& other) noexcept {
  if (this != &other) {
    Reset();
    pid_ = std::exchange(other.pid_, -1);
    launched_ = std::exchange(other.launched_, false);
    released_ = other.released_;
    reaped_ = other.reaped_;
    traced_ = std::exchange(other.traced_, false);
    stop_at_exec_ = other.stop_at_exec_;
    go_fd_ = std::exchange(other.go_fd_, -1);
    exec_error_fd_ = std::exchange(other.exec_error_fd_, -1);
    argv_ = std::move(other.argv_);
  }
  return *this;
}

TargetProcess::~TargetProcess() { Reset(); }

void TargetProcess::Reset() {
  CloseFd(&go_fd_);  // an unreleased child reads EOF and exits
  CloseFd(&exec_error_fd_);
  if (launched_ && pid_ > 0 && !reaped_) {
    // A tracer (the emulator) may have reaped the child itself: ECHILD then, and the pid
    // may already belong to someone else, so nothing is killed.
    int status = 0;
    int rc = WaitPidNoEintr(pid_, &status, WNOHANG);
    bool ended = rc == pid_ && (WIFEXITED(status) || WIFSIGNALED(status));
    if (rc == 0 || (rc == pid_ && !ended)) TerminateChild(pid_);
  }
  launched_ = false;
  pid_ = -1;
}

absl::Status TargetProcess::Release() {
  if (!launched_) return absl::FailedPreconditionError("Release() of a process not launched here");
  if (released_) return absl::FailedPreconditionError("target already released");
  released_ = true;
  // Seized (not PTRACE_TRACEME): a seized tracee can be stopped with PTRACE_INTERRUPT while it
  // is blocked in a system call, so a recording stops at once (docs/cli.md). The child waits
  // for the go byte, so it is traced before it execs.
  if (stop_at_exec_ &&
      ::ptrace(PTRACE_SEIZE, pid_, nullptr, reinterpret_cast<void*>(static_cast<long>(PTRACE_O_TRACEEXEC))) != 0) {
    return ErrnoError("ptrace(PTRACE_SEIZE)", argv_[0], errno);
  }
  char byte = 1;
  if (::write(go_fd_, &byte, 1) != 1) return ErrnoError("cannot release", argv_[0], errno);
  CloseFd(&go_fd_);
  if (stop_at_exec_) return WaitForExec();
  // EOF: exec succeeded and closed the CLOEXEC pipe; an int: exec's errno.
  int err = 0;
  ssize_t n;
  do {
    n = ::read(exec_error_fd_, &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  CloseFd(&exec_error_fd_);
  if (n == static_cast<ssize_t>(sizeof(err))) {
    int status;
    WaitPidNoEintr(pid_, &status, 0);
    reaped_ = true;
    return ErrnoError("cannot execute", argv_[0], err);
  }
  return absl::OkStatus();
}

absl::Status TargetProcess::WaitForExec() {
  int status = 0;
  if (WaitPidNoEintr(pid_, &status, 0) < 0) return ErrnoError("waitpid", argv_[0], errno);
  if (WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP) {
    CloseFd(&exec_error_fd_);
    traced_ = true;
    return absl::OkStatus();
  }
  int err = 0;
  ssize_t n = ::read(exec_error_fd_, &err, sizeof(err));
  CloseFd(&exec_error_fd_);
  if (WIFEXITED(status) || WIFSIGNALED(status)) reaped_ = true;
  if (n == static_cast<ssize_t>(sizeof(err))) return ErrnoError("cannot execute", argv_[0], err);
  return absl::InternalError(absl::StrCat(argv_[0], ": expected a stop at exec, but the child ",
                                          DescribeWaitStatus(status)));
}

absl::Status TargetProcess::Detach() {
  if (!traced_) return absl::FailedPreconditionError("Detach() of a process not traced here");
  if (::ptrace(PTRACE_DETACH, pid_, nullptr, nullptr) != 0) {
    return ErrnoError("PTRACE_DETACH", argv_[0], errno);
  }
  traced_ = false;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> TargetProcess::Threads() const { return ListThreads(pid_); }

absl::StatusOr<int> TargetProcess::Wait() {
  if (!launched_ || reaped_) return absl::FailedPreconditionError("no child to wait for");
  if (traced_) return absl::FailedPreconditionError("child is traced; its tracer waits");
  int status = 0;
  if (WaitPidNoEintr(pid_, &status, 0) < 0) return ErrnoError("waitpid", argv_[0], errno);
  reaped_ = true;
  return status;
}

absl::StatusOr<std::optional<int>> TargetProcess::TryWait() {
  if (!launched_ || reaped_) return absl::FailedPreconditionError("no child to wait for");
  if (traced_) return absl::FailedPreconditionError("child is traced; its tracer waits");
  int status = 0;
  int rc = WaitPidNoEintr(pid_, &status, WNOHANG);
  if (rc < 0) return ErrnoError("waitpid", argv_[0], errno);
  if (rc == 0) return std::optional<int>();
  reaped_ = true;
  return std::optional<int>(status);
}

bool TargetProcess::Alive() const {
  if (pid_ <= 0 || reaped_) return false;
  absl::StatusOr<std::string> stat = ReadFileToString(absl::StrCat("/proc/", pid_, "/stat"));
  if (!stat.ok()) return false;
  // The state letter follows the parenthesized command name, which may contain spaces.
  size_t close = stat->rfind(')');
  return close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] != 'Z' &&
         (*stat)[close + 2] != 'X';
}

absl::Status TargetProcess::Kill(int signal) {
  if (pid_ <= 0 || reaped_) return absl::FailedPreconditionError("no process to signal");
  if (::kill(pid_, signal) != 0) return ErrnoError("kill", absl::StrCat("pid ", pid_), errno);
  return absl::OkStatus();
}

int TracerPid(int pid) {
  absl::StatusOr<std::string> status = ReadFileToString(absl::StrCat("/proc/", pid, "/status"));
  if (!status.ok()) return 0;
  for (absl::string_view line : absl::StrSplit(*status, '\n')) {
    int tracer = 0;
    if (absl::ConsumePrefix(&line, "TracerPid:") && absl::SimpleAtoi(line, &tracer)) return tracer;
  }
  return 0;
}

absl::Status CheckTargetOptions(const RecordOptions& options) {
  const int given = (options.command.empty() ? 0 : 1) + (options.pids.empty() ? 0 : 1) +
                    (options.cgroup.empty() ? 0 : 1);
  if (given == 0) {
    return absl::InvalidArgumentError("record: give a command after --, --pid PID[,PID...] or --cgroup DIR");
  }
  if (given > 1) {
    return absl::InvalidArgumentError("record: give only one of a command, --pid and --cgroup");
  }
  for (size_t i = 0; i < options.pids.size(); ++i) {
    if (options.pids[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--pid ", options.pids[i], ": not a process id"));
    }
    if (std::find(options.pids.begin(), options.pids.begin() + static_cast<long>(i), options.pids[i]) !=
        options.pids.begin() + static_cast<long>(i)) {
      return absl::InvalidArgumentError(absl::StrCat("--pid ", options.pids[i], ": given twice"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> CgroupProcesses(const std::string& dir) {
  const std::string procs = absl::StrCat(dir, "/cgroup.procs");
  if (!IsDirectory(dir)) return absl::NotFoundError(absl::StrCat("--cgroup ", dir, ": no such directory"));
  absl::StatusOr<std::string> text = ReadFileToString(procs);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("--cgroup ", dir, ": not a cgroup directory (", text.status().message(), ")"));
  }
  std::vector<int> pids;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  if (pids.empty()) return absl::NotFoundError(absl::StrCat("--cgroup ", dir, ": no process in ", procs));
  return pids;
}

absl::StatusOr<std::vector<int>> ProcessesToAttach(const RecordOptions& options) {
  if (options.cgroup.empty()) return options.pids;
  absl::StatusOr<std::vector<int>> members = CgroupProcesses(options.cgroup);
  if (!members.ok()) return members.status();
  // A zombie still listed (its parent has not reaped it) has nothing left to trace.
  std::vector<int> running;
  for (int pid : *members) {
    if (!IsZombie(pid)) running.push_back(pid);
  }
  if (running.empty()) {
    return absl::NotFoundError(absl::StrCat("--cgroup ", options.cgroup, ": no running process in it"));
  }
  return running;
}

}  // namespace ptd
