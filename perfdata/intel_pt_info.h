#pragma once
// The Intel PT private words of PERF_RECORD_AUXTRACE_INFO (perf's intel-pt.h priv[]
// layout, positions INTEL_PT_PMU_TYPE .. INTEL_PT_FILTER_STR_LEN, then the filter
// string padded to 8 bytes). Older perf versions wrote fewer words; absent ones stay 0
// and `words_present` says how many were there.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ptd::perfdata {

struct IntelPtInfo {
  uint64_t pmu_type = 0;
  uint64_t time_shift = 0;
  uint64_t time_mult = 0;
  uint64_t time_zero = 0;
  uint64_t cap_user_time_zero = 0;
  uint64_t tsc_bit = 0;        // config mask of the tsc format field
  uint64_t noretcomp_bit = 0;
  uint64_t have_sched_switch = 0;  // 0 none, 1 sched_switch tracepoint, 2/3 context_switch records
  uint64_t snapshot_mode = 0;
  uint64_t per_cpu_mmaps = 0;
  uint64_t mtc_bit = 0;
  uint64_t mtc_freq_bits = 0;  // config mask of mtc_period
  uint64_t tsc_ctc_ratio_n = 0;  // cpuid 0x15 ebx
  uint64_t tsc_ctc_ratio_d = 0;  // cpuid 0x15 eax
  uint64_t cyc_bit = 0;
  uint64_t max_non_turbo_ratio = 0;
  uint64_t filter_str_len = 0;
  std::string filter;
  int words_present = 0;
};

// intel_pt format field positions in perf_event_attr.config (sysfs
// .../intel_pt/format/*: the architectural RTIT_CTL layout, the same on every PT CPU).
// AUXTRACE_INFO carries some of them as masks; perf.data readers need the others too.
inline constexpr uint64_t kPtEnBit = 1ull << 0;
inline constexpr uint64_t kCycBit = 1ull << 1;
inline constexpr uint64_t kMtcBit = 1ull << 9;
inline constexpr uint64_t kTscBit = 1ull << 10;
inline constexpr uint64_t kNoRetCompBit = 1ull << 11;
inline constexpr uint64_t kBranchEnBit = 1ull << 13;
inline constexpr uint64_t kMtcPeriodMask = 0xfull << 14;
inline constexpr uint64_t kCycThreshMask = 0xfull << 19;
inline constexpr uint64_t kPsbPeriodMask = 0xfull << 24;

// Number of fixed priv words (INTEL_PT_PMU_TYPE .. INTEL_PT_FILTER_STR_LEN).
inline constexpr int kIntelPtFixedWords = 17;

// `priv` are the u64 words after the record's type/reserved fields.
absl::StatusOr<IntelPtInfo> ParseIntelPtInfo(absl::Span<const uint64_t> priv);
std::vector<uint64_t> SerializeIntelPtInfo(const IntelPtInfo& info);

// Value of the config field selected by `mask` (shifted down), 0 for an empty mask.
uint64_t ConfigField(uint64_t config, uint64_t mask);

}  // namespace ptd::perfdata
