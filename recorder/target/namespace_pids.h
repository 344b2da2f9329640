#pragma once
// Processes in other pid namespaces (containers) have a pid of their own there: the
// NSpid line of /proc/PID/status lists it after the host's. Traces keep the host's pids
// (perf's records carry them) and note the namespace's, so tracks can show both.

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace ptd {

// The innermost namespace pid of `pid` from an NSpid line ("NSpid:\t30132\t1" -> 1);
// the pid itself when it has no other namespace. `status` is /proc/PID/status's text.
absl::StatusOr<int> InnermostPidFromStatus(const std::string& status, const std::string& source);

// For `pid` and its threads (alive now): {host tid: tid in its own namespace}, only for
// those that differ. Empty when the process is gone or in the recorder's namespace.
std::map<int, int> ReadNamespaceTids(int pid);

}  // namespace ptd
