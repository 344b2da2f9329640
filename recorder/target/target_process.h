#pragma once
// The process being recorded: either launched by us (held before exec until the perf
// events exist, so nothing it does is missed) or an existing one attached to by pid.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recorder/session/record_options.h"

namespace ptd {

struct LaunchOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH unless it has a '/'
  // The child calls PTRACE_TRACEME before exec, so it stops with SIGTRAP right after
  // exec: Release() returns once it is stopped there, with the new image (and its vDSO)
  // in place and nothing run yet. The launching thread is then its tracer: it may keep
  // it (the emulator) or Detach() it.
  bool stop_at_exec = false;
  // The child gets SIGKILL when the recorder thread that launched it dies.
  bool kill_with_parent = true;
};

class TargetProcess {
 public:
  // Forks a child that waits on a pipe; the caller opens its events on pid() (with
  // enable_on_exec) and then calls Release() to let it exec. The executable is resolved
  // in the parent so a missing command is reported before the fork.
  static absl::StatusOr<TargetProcess> Launch(const LaunchOptions& options);
  // An existing process; checks that /proc/PID exists and has not exited (a zombie).
  static absl::StatusOr<TargetProcess> Attach(int pid);

  TargetProcess(TargetProcess&& other) noexcept;
  TargetProcess& operator=(TargetProcess&& other) noexcept;
  TargetProcess(const TargetProcess&) = delete;
  TargetProcess& operator=(const TargetProcess&) = delete;
  // A launched child still there is killed (SIGKILL) and reaped (one a tracer already
  // reaped is left alone); an attached process is left alone.
  ~TargetProcess();

  int pid() const { return pid_; }
  bool launched() const { return launched_; }
  const std::vector<std::string>& argv() const { return argv_; }

  // Launched only: lets the child exec. Returns an error naming the command when exec
  // failed (the child then exits with 127 and is reaped here). With stop_at_exec, returns
  // when the child is stopped right after exec.
  absl::Status Release();
  // stop_at_exec only: lets the stopped child run untraced.
  absl::Status Detach();
  // True while the child is traced by this thread (stop_at_exec and not detached).
  bool traced() const { return traced_; }

  // Thread ids now in /proc/PID/task, sorted.
  absl::StatusOr<std::vector<int>> Threads() const;

  // Launched only: waits for the child to end; returns the raw wait status. Not while
  // traced (the tracer waits itself).
  absl::StatusOr<int> Wait();
  // Launched only: the wait status if the child has ended, nullopt if still running.
  absl::StatusOr<std::optional<int>> TryWait();
  // True while /proc/PID exists and is not a zombie.
  bool Alive() const;
  absl::Status Kill(int signal);

 private:
  TargetProcess() = default;
  void Reset();
  absl::Status WaitForExec();

  int pid_ = -1;
  bool launched_ = false;
  bool released_ = false;
  bool reaped_ = false;
  bool traced_ = false;
  bool stop_at_exec_ = false;
  int go_fd_ = -1;          // write end: one byte lets the child exec
  int exec_error_fd_ = -1;  // read end: errno from a failed exec, EOF when exec worked
  std::vector<std::string> argv_;
};

// The file exec would run for `name`: itself when it has a '/', else the first
// executable regular file of that name in $PATH. NotFound / an errno error otherwise.
absl::StatusOr<std::string> ResolveExecutable(const std::string& name);

// "SIGSEGV" (or "SIG42").
std::string SignalName(int signal);

// Text form of a wait status: "exited with 3", "killed by SIGSEGV".
std::string DescribeWaitStatus(int status);

// A wait status as a shell reports it: the exit code, or 128 + the killing signal.
int ShellExitCode(int wait_status);

// Ends a launched child still running when the recording stopped, as `perf record` ends its
// workload: SIGTERM (the program may clean up), SIGKILL if it has not ended after
// `grace_s` or is stopped for us as its tracer. Returns its wait status (it is reaped).
int TerminateChild(int pid, double grace_s = 2);

// The error for a failed PTRACE_ATTACH (or PTRACE_SEIZE) of thread `tid` of process
// `pid`, saying what to change: EPERM names an existing tracer, ptrace_scope and
// CAP_SYS_PTRACE; ESRCH says the process exited during the attach.
absl::Status PtraceAttachError(int errno_value, int pid, int tid);

// True when /proc/PID/stat says the process is a zombie (exited, not yet reaped).
bool IsZombie(int pid);

// The TracerPid of /proc/PID/status: 0 when not traced (or gone).
int TracerPid(int pid);

// The target part of `options`: exactly one of a command, --pid (pids > 0, no repeats)
// and --cgroup. InvalidArgument naming the option otherwise.
absl::Status CheckTargetOptions(const RecordOptions& options);

// The processes in the cgroup directory `dir` now (its cgroup.procs; v1 or v2), sorted.
// An error naming `dir` when it is not a cgroup directory, cannot be read, or is empty.
absl::StatusOr<std::vector<int>> CgroupProcesses(const std::string& dir);

// The running processes `record` attaches to: options.pids as given, or the members of
// options.cgroup now that are not zombies. Empty when it launches a command.
absl::StatusOr<std::vector<int>> ProcessesToAttach(const RecordOptions& options);

}  // namespace ptd
