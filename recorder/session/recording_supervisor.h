#pragma once
// A recording that outlives the process that started it. Attached with ptrace, a thread
// of the target between two single steps has the trap flag set; if the tracer dies
// without PTRACE_DETACH (SIGKILL), the kernel detaches it with the flag still set and the
// thread dies of SIGTRAP (exit_ptrace skips ptrace_disable). So the recording runs in a
// child process, and the process the user started (and may kill) only supervises it:
// signals sent to it are passed on, and if it dies the child gets SIGTERM (the parent-
// death signal), stops the way SIGTERM stops a recording — every thread detached
// cleanly, the trace committed — and exits.

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace ptd {

// Runs `record` in a child process and returns its result: the exit code it returned, or
// 128 + the signal that killed it. SIGINT, SIGTERM and SIGUSR2 sent to this process by
// another process are passed on to the child (a terminal's Ctrl-C reaches both: the whole
// foreground process group gets it). Call with a single thread running (it forks).
absl::StatusOr<int> RunSupervised(absl::FunctionRef<int()> record);

}  // namespace ptd
