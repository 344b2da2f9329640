#pragma once
// The Intel PT private words of PERF_RECORD_AUXTRACE_INFO (perf's intel-pt.h priv[]
// layout, positions INTEL_PT_PMU_TYPE .. INTEL_PT_FILTER_STR_LEN, then the filter
// string padded to 8 bytes). Older perf versions wrote fewer words; absent ones stay 0
// and `words_present` says how many were there.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ptd::perfdata {

// Positions of the fixed words in priv[] (perf's INTEL_PT_PMU_TYPE ..
// INTEL_PT_FILTER_STR_LEN).
enum IntelPtWord : int {
  kWordPmuType, kWordTimeShift, kWordTimeMult, kWordTimeZero, kWordCapUserTimeZero,
  kWordTscBit,        // config mask of the tsc format field
  kWordNoRetCompBit,
  kWordHaveSchedSwitch,  // 0 none, 1 sched_switch tracepoint, 2/3 context_switch records
  kWordSnapshotMode, kWordPerCpuMmaps, kWordMtcBit,
  kWordMtcFreqBits,   // config mask of mtc_period
  kWordTscCtcRatioN,  // cpuid 0x15 ebx
  kWordTscCtcRatioD,  // cpuid 0x15 eax
  kWordCycBit, kWordMaxNonTurboRatio, kWordFilterStrLen,
  kIntelPtFixedWords,  // how many
};

struct IntelPtInfo {
  uint64_t operator[](IntelPtWord word) const { return words[word]; }
  uint64_t& operator[](IntelPtWord word) { return words[word]; }

  std::array<uint64_t, kIntelPtFixedWords> words{};
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

// `priv` are the u64 words after the record's type/reserved fields.
absl::StatusOr<IntelPtInfo> ParseIntelPtInfo(absl::Span<const uint64_t> priv);
std::vector<uint64_t> SerializeIntelPtInfo(const IntelPtInfo& info);

// Value of the config field selected by `mask` (shifted down), 0 for an empty mask.
uint64_t ConfigField(uint64_t config, uint64_t mask);

}  // namespace ptd::perfdata
