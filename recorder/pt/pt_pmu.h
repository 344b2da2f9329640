#pragma once
// The intel_pt PMU as the running kernel describes it in sysfs. The sysfs root is a
// parameter so tests can point it at a fake tree laid out like a real Intel machine's.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/host_info.h"
#include "recorder/pt/pmu_format.h"

namespace ptd::pt {

inline constexpr char kNoPtPmuMessage[] =
    "no intel_pt PMU on this machine (AMD, VM, or old kernel); use --emulate";

struct PtPmuInfo {
  int type = -1;                                 // perf_event_attr.type
  std::map<std::string, PmuFormatField> format;  // format/<name>
  std::map<std::string, std::string> caps;       // caps/<name>, whitespace trimmed
  uint32_t max_nonturbo_ratio = 0;               // nominal frequency ratio, for CYC
  uint32_t tsc_art_ratio_num = 0;                // "num:den" (TSC = ART * num / den), for MTC
  uint32_t tsc_art_ratio_den = 0;
  CpuId cpu;                                     // family/model/stepping for libipt errata

  // caps/<name> as a number; 0 when absent or not a number.
  uint64_t Cap(const std::string& name) const;
};

// Reads <sysfs_root>/bus/event_source/devices/intel_pt. FailedPrecondition with
// kNoPtPmuMessage when the directory is absent; errors name the file at fault.
absl::StatusOr<PtPmuInfo> DiscoverPtPmu(const std::string& sysfs_root = "/sys");

std::string PtPmuDir(const std::string& sysfs_root);

}  // namespace ptd::pt
