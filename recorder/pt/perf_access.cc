#include "recorder/pt/perf_access.h"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace ptd::pt {
namespace {

constexpr int kCapIpcLock = 14;
constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;

std::string FixAdvice(const PerfAccess& access, int needed) {
  return absl::StrCat("kernel.perf_event_paranoid is ", access.paranoid,
                      "; run `sudo sysctl kernel.perf_event_paranoid=", needed,
                      "`, or run as root / grant CAP_PERFMON (setcap cap_perfmon+ep ptrace-direct)");
}

}  // namespace

PerfAccess ReadPerfAccess(const std::string& proc_root) {
  PerfAccess access;
  if (absl::StatusOr<std::string> text =
          ReadFileToString(proc_root + "/sys/kernel/perf_event_paranoid");
      text.ok()) {
    int value = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &value)) access.paranoid = value;
  }
  if (absl::StatusOr<std::string> text =
          ReadFileToString(proc_root + "/sys/kernel/perf_event_mlock_kb");
      text.ok()) {
    uint64_t value = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &value)) access.mlock_kb = value;
  }
  if (absl::StatusOr<std::string> status = ReadFileToString(proc_root + "/self/status");
      status.ok()) {
    for (absl::string_view line : absl::StrSplit(*status, '\n')) {
      if (!absl::ConsumePrefix(&line, "CapEff:")) continue;
      uint64_t caps = 0;
      if (absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line), &caps)) {
        access.has_perfmon = ((caps >> kCapPerfmon) & 1) || ((caps >> kCapSysAdmin) & 1);
        access.has_ipc_lock = (caps >> kCapIpcLock) & 1;
      }
    }
  }
  return access;
}

absl::Status CheckPerfAccess(const PerfAccess& access, bool kernel, bool cpu_wide) {
  if (access.has_perfmon) return absl::OkStatus();
  // Debian and Android use 3 (and above) for "no perf_event_open without CAP_PERFMON".
  if (access.paranoid >= 3) {
    return absl::FailedPreconditionError(
        absl::StrCat("perf_event_open is disabled for unprivileged users: ",
                     FixAdvice(access, 2)));
  }
  if (cpu_wide && access.paranoid > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--cgroup records whole CPUs, which needs CPU-wide rights: ",
                     FixAdvice(access, 0)));
  }
  if (kernel && access.paranoid >= 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("--kernel needs kernel tracing rights: ", FixAdvice(access, 1)));
  }
  return absl::OkStatus();
}

}  // namespace ptd::pt
