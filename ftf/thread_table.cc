#include "ftf/thread_table.h"

#include <algorithm>

namespace ptd::ftf {

ThreadTable::ThreadTable(uint8_t capacity)
    : recycler_(std::max<uint8_t>(capacity, 1)),
      keys_(recycler_.capacity() + 1),
      in_use_(recycler_.capacity() + 1, false) {}

ThreadTable::Ref ThreadTable::InternByHash(const Key& key) {
  auto it = index_of_.find(key);
  if (it != index_of_.end()) {
    recycler_.Touch(it->second);
    last_index_ = it->second;
    return Ref{it->second, false};
  }
  auto index = static_cast<uint8_t>(recycler_.Claim());
  if (in_use_[index]) index_of_.erase(keys_[index]);
  keys_[index] = key;
  in_use_[index] = true;
  index_of_.emplace(key, index);
  last_index_ = index;
  return Ref{index, true};
}

}  // namespace ptd::ftf
