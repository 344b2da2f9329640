#include "recorder/sideband/perf_event.h"

#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"

namespace ptd {
namespace {

// What to change, in words, for the errors users actually hit.
std::string OpenErrorHint(int err, bool cpu_wide) {
  switch (err) {
    case EACCES:
    case EPERM:
      return "; run as root, grant CAP_PERFMON, or lower "
             "/proc/sys/kernel/perf_event_paranoid (e.g. to 1); a process of another user "
             "also needs its owner or CAP_SYS_PTRACE";
    case ENOENT:
    case ENODEV:
      return "; this PMU or event type does not exist on this machine";
    case EOPNOTSUPP:
      return "; this kernel or PMU does not support a requested feature";
    case EMFILE:
      return "; too many open files (raise ulimit -n)";
    case ESRCH:
      return "; no such process";
    case EBUSY:
      // exclusive_event_init: per-task and CPU-wide events of an exclusive PMU (intel_pt)
      // exclude each other system-wide; exclusive_event_installable: two on one task
      // whose CPUs overlap; pt_event_init: LBR users exclude PT.
      return cpu_wide
                 ? "; another PT user is active: per-task Intel PT events exist (perf record "
                   "-e intel_pt -p/--per-thread or a command, another ptrace-direct), and the "
                   "kernel refuses CPU-wide ones (as --cgroup opens) while they do; or an LBR "
                   "user (perf record -b, --call-graph lbr) holds the PMU; stop that and retry"
                 : "; another PT user is active: a CPU-wide Intel PT session (perf record -a "
                   "-e intel_pt) excludes per-task events, a second tracer of this thread "
                   "holds its PT, or an LBR user (perf record -b, --call-graph lbr) holds the "
                   "PMU; stop that and retry";
    case EINVAL:
      return "; the kernel refused the event's settings (--pt-config, --filter, sizes)";
    default:
      return "";
  }
}

}  // namespace

absl::StatusOr<PerfEvent> PerfEvent::Open(const perf_event_attr& attr, int pid, int cpu,
                                          int group_fd, unsigned long flags) {
  long fd = ::syscall(SYS_perf_event_open, &attr, pid, cpu, group_fd,
                      flags | PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return PerfOpenError(errno, attr, pid, cpu, flags);
  return PerfEvent(static_cast<int>(fd));
}

absl::Status PerfOpenError(int err, const perf_event_attr& attr, int pid, int cpu,
                           unsigned long flags) {
  const bool cpu_wide = pid == -1 || (flags & PERF_FLAG_PID_CGROUP) != 0;
  std::string what = absl::StrFormat(
      "perf_event_open(type=%u, config=0x%x, pid=%d, cpu=%d) failed: %s%s", attr.type,
      attr.config, pid, cpu, std::strerror(err), OpenErrorHint(err, cpu_wide));
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(what);
  if (err == ENOENT || err == ENODEV || err == EOPNOTSUPP || err == EBUSY) {
    return absl::FailedPreconditionError(what);
  }
  if (err == EINVAL) return absl::InvalidArgumentError(what);
  if (err == ESRCH) return absl::NotFoundError(what);
  return absl::InternalError(what);
}

absl::Status PerfEvent::Ioctl(unsigned long request, unsigned long arg, const char* what) const {
  if (fd() < 0) return absl::FailedPreconditionError(absl::StrCat(what, " on a closed perf event"));
  if (::ioctl(fd(), request, arg) < 0) {
    int err = errno;
    return absl::InternalError(
        absl::StrFormat("%s on perf event fd %d failed: %s", what, fd(), std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::Status PerfEvent::Enable() { return Ioctl(PERF_EVENT_IOC_ENABLE, 0, "PERF_EVENT_IOC_ENABLE"); }
absl::Status PerfEvent::Disable() {
  return Ioctl(PERF_EVENT_IOC_DISABLE, 0, "PERF_EVENT_IOC_DISABLE");
}
absl::Status PerfEvent::Reset() { return Ioctl(PERF_EVENT_IOC_RESET, 0, "PERF_EVENT_IOC_RESET"); }
absl::Status PerfEvent::Refresh(int count) {
  return Ioctl(PERF_EVENT_IOC_REFRESH, static_cast<unsigned long>(count), "PERF_EVENT_IOC_REFRESH");
}
absl::Status PerfEvent::SetOutput(const PerfEvent& target) {
  return Ioctl(PERF_EVENT_IOC_SET_OUTPUT, static_cast<unsigned long>(target.fd()),
               "PERF_EVENT_IOC_SET_OUTPUT");
}
absl::Status PerfEvent::SetFilter(const std::string& filter) {
  return Ioctl(PERF_EVENT_IOC_SET_FILTER, reinterpret_cast<unsigned long>(filter.c_str()),
               "PERF_EVENT_IOC_SET_FILTER");
}
absl::Status PerfEvent::PauseOutput(bool pause) {
  return Ioctl(PERF_EVENT_IOC_PAUSE_OUTPUT, pause ? 1 : 0, "PERF_EVENT_IOC_PAUSE_OUTPUT");
}

absl::StatusOr<uint64_t> PerfEvent::Id() const {
  uint64_t id = 0;
  absl::Status st = Ioctl(PERF_EVENT_IOC_ID, reinterpret_cast<unsigned long>(&id), "PERF_EVENT_IOC_ID");
  if (!st.ok()) return st;
  return id;
}

absl::StatusOr<uint64_t> PerfEvent::ReadCounter() const {
  uint64_t value = 0;
  if (fd() < 0) return absl::FailedPreconditionError("read of a closed perf event");
  ssize_t n = ::read(fd(), &value, sizeof(value));
  if (n != static_cast<ssize_t>(sizeof(value))) {
    int err = n < 0 ? errno : EIO;
    return absl::InternalError(
        absl::StrFormat("read of perf event fd %d failed: %s", fd(), std::strerror(err)));
  }
  return value;
}

}  // namespace ptd
