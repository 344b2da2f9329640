#include "ftf/string_table.h"

#include <algorithm>
#include <cstdint>

namespace ptd::ftf {

StringTable::StringTable(uint16_t capacity) : recycler_(std::max(capacity, kMinStringTableSize)) {
  // Reserved, not made: a page of it is touched (and faulted in) only when indices on it
  // are first claimed. index_of_ grows as it fills (its keys view values_, which stay).
  values_.reserve(recycler_.capacity() + 1);
  values_.emplace_back();  // index 0 (reserved by the format)
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
  if (index == values_.size()) values_.emplace_back();  // claimed for the first time
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
