#include "ftf/string_table.h"

#include <algorithm>
#include <cstdint>

namespace ptd::ftf {

StringTable::StringTable(uint16_t capacity)
    : recycler_(std::max(capacity, kMinStringTableSize)), values_(recycler_.capacity() + 1) {
  index_of_.reserve(recycler_.capacity());
}

StringTable::Ref StringTable::InternByValue(absl::string_view s, RecentEntry& recent) {
  auto it = index_of_.find(s);
  if (it != index_of_.end()) {
    recycler_.Touch(it->second);
    recent = RecentEntry{s.data(), s.size(), it->second};
    return Ref{it->second, false};
  }
  auto index = static_cast<uint16_t>(recycler_.Claim());
  recent = RecentEntry{s.data(), s.size(), index};
  std::string& value = values_[index];
  if (!value.empty()) {
    index_of_.erase(absl::string_view(value));
    ++redefinitions_;
  }
  value.assign(s.data(), s.size());
  index_of_.emplace(absl::string_view(value), index);
  return Ref{index, true};
}

}  // namespace ptd::ftf
