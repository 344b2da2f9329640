#include "perfdata/intel_pt_info.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace ptd::perfdata {

absl::StatusOr<IntelPtInfo> ParseIntelPtInfo(absl::Span<const uint64_t> priv) {
  IntelPtInfo info;
  const int n = static_cast<int>(std::min<size_t>(priv.size(), kIntelPtFixedWords));
  // perf 4.x wrote at least up to PER_CPU_MMAPS; fewer words cannot describe a trace.
  if (n < 10) {
    return absl::DataLossError(
        absl::StrFormat("Intel PT AUXTRACE_INFO has %d private words, need at least 10", n));
  }
  std::copy(priv.begin(), priv.begin() + n, info.words.begin());
  info.words_present = n;
  if (n == kIntelPtFixedWords && info[kWordFilterStrLen] > 0) {
    const size_t avail = (priv.size() - kIntelPtFixedWords) * sizeof(uint64_t);
    if (info[kWordFilterStrLen] > avail) {
      return absl::DataLossError(absl::StrFormat(
          "Intel PT filter string length %u exceeds the %u bytes after the fixed words",
          info[kWordFilterStrLen], avail));
    }
    const char* text = reinterpret_cast<const char*>(priv.data() + kIntelPtFixedWords);
    info.filter.assign(text, strnlen(text, info[kWordFilterStrLen]));
  }
  return info;
}

std::vector<uint64_t> SerializeIntelPtInfo(const IntelPtInfo& info) {
  std::vector<uint64_t> priv(info.words.begin(), info.words.end());
  priv[kWordFilterStrLen] = info.filter.size();  // strlen, as perf writes it
  if (!info.filter.empty()) {
    // NUL-terminated and padded to whole words, as perf writes it.
    std::string padded = info.filter;
    padded.resize((info.filter.size() + 1 + 7) / 8 * 8, '\0');
    for (size_t i = 0; i < padded.size(); i += 8) {
      uint64_t word;
      std::memcpy(&word, padded.data() + i, sizeof(word));
      priv.push_back(word);
    }
  }
  return priv;
}

uint64_t ConfigField(uint64_t config, uint64_t mask) {
  if (mask == 0) return 0;
  return (config & mask) >> __builtin_ctzll(mask);
}

}  // namespace ptd::perfdata
