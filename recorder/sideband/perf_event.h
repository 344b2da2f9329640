#pragma once
// An owned perf_event_open file descriptor and the ioctls the recorder issues on it.
// Closing the fd is the only way the kernel frees the event and its rings, so the
// ownership is explicit: move-only, closed by the destructor.

#include <linux/perf_event.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ptd {

// The status for perf_event_open failing with `err`: names the event, pid and cpu and
// says what to change (EACCES/EPERM: paranoid/CAP_PERFMON; EBUSY: PT and LBR are
// exclusive, and which other PT user excludes a per-task (pid >= 0) or a CPU-wide (pid -1
// or PERF_FLAG_PID_CGROUP in `flags`) event; EINVAL: refused settings). ESRCH is NotFound
// (the thread is gone).
absl::Status PerfOpenError(int err, const perf_event_attr& attr, int pid, int cpu,
                           unsigned long flags = 0);

class PerfEvent {
 public:
  // perf_event_open(attr, pid, cpu, group_fd, flags | PERF_FLAG_FD_CLOEXEC). The error
  // names the event (type/config), pid and cpu, and says what to change for EACCES/EPERM
  // (perf_event_paranoid, CAP_PERFMON) and ENOENT/EOPNOTSUPP (PMU or feature missing).
  static absl::StatusOr<PerfEvent> Open(const perf_event_attr& attr, int pid, int cpu,
                                        int group_fd = -1, unsigned long flags = 0);

  PerfEvent() = default;
  // Takes ownership of an fd opened elsewhere (tests, fakes).
  explicit PerfEvent(int fd) : fd_(fd) {}

  int fd() const { return fd_.get(); }
  bool valid() const { return fd_.valid(); }

  absl::Status Enable();
  absl::Status Disable();
  absl::Status Reset();
  // Allows `count` more overflows before disabling again (one-shot breakpoints).
  absl::Status Refresh(int count);
  // Sends this event's records into `target`'s ring (same CPU or same task).
  absl::Status SetOutput(const PerfEvent& target);
  // PERF_EVENT_IOC_SET_FILTER: address filters for intel_pt ("filter 0x1000/0x200@/bin/x").
  absl::Status SetFilter(const std::string& filter);
  // PERF_EVENT_IOC_PAUSE_OUTPUT: stops (true) or resumes (false) writing into the ring.
  absl::Status PauseOutput(bool pause);
  // PERF_EVENT_IOC_ID: the id the kernel puts in PERF_SAMPLE_IDENTIFIER.
  absl::StatusOr<uint64_t> Id() const;
  // read(2) of the counter value (no read_format bits).
  absl::StatusOr<uint64_t> ReadCounter() const;

  // Closes now (idempotent).
  void Close() { fd_.Reset(); }
  // Gives up ownership without closing.
  int Release() { return fd_.Release(); }

 private:
  absl::Status Ioctl(unsigned long request, unsigned long arg, const char* what) const;

  UniqueFd fd_;
};

}  // namespace ptd
