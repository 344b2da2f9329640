#include "decoder/stats.h"

#include <algorithm>

namespace ptd::decoder {
namespace {

enum class MergeRule : uint8_t { kSum, kMax };

struct StatInfo {
  absl::string_view key;
  MergeRule merge;
};

constexpr StatInfo kStatInfo[] = {
#define PTD_STAT_INFO(name, key, merge, meaning) {key, MergeRule::merge},
    PTD_DECODE_STATS(PTD_STAT_INFO)
#undef PTD_STAT_INFO
};
static_assert(sizeof kStatInfo / sizeof kStatInfo[0] == kStatCount);

}  // namespace

absl::string_view Stats::Key(Stat stat) { return kStatInfo[Index(stat)].key; }

void Stats::Merge(const Stats& other) {
  for (size_t i = 0; i < kStatCount; ++i) {
    values_[i] = kStatInfo[i].merge == MergeRule::kSum ? values_[i] + other.values_[i]
                                                        : std::max(values_[i], other.values_[i]);
  }
}

Stats Stats::Since(const Stats& before) const {
  Stats delta;
  for (size_t i = 0; i < kStatCount; ++i) {
    delta.values_[i] = kStatInfo[i].merge == MergeRule::kSum ? values_[i] - before.values_[i] : values_[i];
  }
  return delta;
}

}  // namespace ptd::decoder
