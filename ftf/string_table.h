#pragma once
// The writer's side of FTF string interning: string -> 15-bit index, recycling indices
// when all are in use.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "ftf/slot_recycler.h"

namespace ptd::ftf {

// A record refers to at most 2 + 2 * 15 strings (category, name, arg names and string
// values); the table must be larger so they can all be live at once.
inline constexpr uint16_t kMinStringTableSize = 64;

class StringTable {
 public:
  using Ref = InternedRef<uint16_t>;

  explicit StringTable(uint16_t capacity);

  // `s` must be non-empty and within the format's length limit.
  Ref Intern(absl::string_view s);
  // Called once per record written: refs handed out before may now be recycled.
  void NextRecord() { recycler_.NextRecord(); }

 private:
  // Callers mostly pass views of long-lived names (symbol tables, literals), so the same
  // pointer comes back again and again: a small cache keyed by address skips hashing.
  // A hit is confirmed by comparing the bytes with what the index means now, so a reused
  // address or a recycled index can never give a wrong answer.
  struct RecentEntry {
    const char* data = nullptr;
    size_t size = 0;
    uint16_t index = 0;
  };
  static constexpr size_t kRecentEntries = 1024;

  SlotRecycler recycler_;
  std::array<RecentEntry, kRecentEntries> recent_ = {};
  // values_[index] is what index currently means; sized once so the keys of index_of_,
  // which view these strings, never move.
  std::vector<std::string> values_;
  absl::flat_hash_map<absl::string_view, uint16_t> index_of_;
};

}  // namespace ptd::ftf
