#pragma once
// The signal state a launched program starts with. The recorder blocks or catches
// SIGINT, SIGTERM and SIGUSR2 for itself, and a blocked mask and ignored dispositions
// survive fork() and execve(); without a reset the target would ignore Ctrl-C and kill
// and lose its own SIGUSR2. Every backend's launch path calls this in its child.

namespace ptd {

// Between fork() and exec(), in the child: puts back the signal mask and the ignored
// dispositions ptrace-direct itself was started with (captured before main(), so before
// any recorder changed them); every other signal gets its default action.
// Async-signal-safe.
void RestoreStartupSignalState();

}  // namespace ptd
