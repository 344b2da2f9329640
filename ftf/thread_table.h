#pragma once
// The writer's side of FTF thread interning: (process koid, thread koid) -> 8-bit index,
// recycling indices when more than 255 threads appear.

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ftf/slot_recycler.h"

namespace ptd::ftf {

class ThreadTable {
 public:
  using Ref = InternedRef<uint8_t>;

  explicit ThreadTable(uint8_t capacity);

  Ref Intern(uint64_t pid, uint64_t tid) {
    // Events come in runs on one thread: the last answer is checked before hashing.
    if (last_index_ != 0 && keys_[last_index_] == Key{pid, tid}) {
      recycler_.Touch(last_index_);
      return Ref{last_index_, false};
    }
    return InternByHash(Key{pid, tid});
  }
  void NextRecord() { recycler_.NextRecord(); }

 private:
  using Key = std::pair<uint64_t, uint64_t>;
  Ref InternByHash(const Key& key);

  SlotRecycler recycler_;
  uint8_t last_index_ = 0;
  std::vector<Key> keys_;     // by index
  std::vector<bool> in_use_;  // by index
  absl::flat_hash_map<Key, uint8_t> index_of_;
};

}  // namespace ptd::ftf
