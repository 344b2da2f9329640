#pragma once
// Why perf_event_open may refuse us, said in terms of what the user has to change
// (kernel.perf_event_paranoid, CAP_PERFMON), checked before opening anything.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ptd::pt {

struct PerfAccess {
  int paranoid = 2;            // /proc/sys/kernel/perf_event_paranoid (2 when unreadable)
  bool has_perfmon = false;    // CAP_PERFMON or CAP_SYS_ADMIN in the effective set
  bool has_ipc_lock = false;   // CAP_IPC_LOCK in the effective set
  // /proc/sys/kernel/perf_event_mlock_kb (516 when unreadable, the kernel's default):
  // perf_mmap lets one user lock this much per online CPU, summed over all its rings.
  uint64_t mlock_kb = 516;
  // perf_mmap() charges ring pages beyond perf_event_mlock_kb per CPU to RLIMIT_MEMLOCK
  // and refuses more with EPERM unless CAP_IPC_LOCK or perf_event_paranoid is -1.
  bool mlock_unlimited() const { return has_ipc_lock || paranoid < 0; }
};

// Reads <proc_root>/sys/kernel/perf_event_paranoid and <proc_root>/self/status (CapEff).
PerfAccess ReadPerfAccess(const std::string& proc_root = "/proc");

// FailedPrecondition naming the setting to change when `access` cannot record
// user-space (or, with `kernel`, kernel) trace of another process, or with `cpu_wide`
// (a cgroup's events: no task) whole CPUs, which perf_allow_cpu permits only at
// perf_event_paranoid <= 0 or with CAP_PERFMON.
absl::Status CheckPerfAccess(const PerfAccess& access, bool kernel, bool cpu_wide = false);

}  // namespace ptd::pt
