#pragma once
// The writer's side of FTF string interning: string -> 15-bit index, recycling indices
// when all are in use.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

  // `s` must be non-empty and within the format's length limit. Inline: nearly every call
  // is a hit in the recent cache (an event's category and name seen just before).
  Ref Intern(absl::string_view s) {
    RecentEntry& recent = recent_[RecentSlot(s)];
    if (recent.data == s.data() && recent.size == s.size() && recent.index != 0) {
      const std::string& value = values_[recent.index];
      if (value.size() == s.size() && SameBytes(value.data(), s.data(), s.size())) {
        recycler_.Touch(recent.index);
        return Ref{recent.index, false};
      }
    }
    return InternByValue(s, recent);
  }
  // Called once per record written: refs handed out before may now be recycled.
  void NextRecord() { recycler_.NextRecord(); }
  // Uses `index` (still meaning what it meant) in the current record.
  void Touch(uint16_t index) { recycler_.Touch(index); }
  // How many times an index has been given a new meaning (only once the table is full):
  // an index handed out when this was N still means the same while it is N.
  uint64_t redefinitions() const { return redefinitions_; }

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
  // memcmp(a, b, n) == 0, without a library call for the short names most events have:
  // 8 to 16 bytes as two (overlapping) 8-byte words.
  static bool SameBytes(const char* a, const char* b, size_t n) {
    if (n < 8 || n > 16) return std::memcmp(a, b, n) == 0;
    uint64_t a0, a1, b0, b1;
    std::memcpy(&a0, a, 8);
    std::memcpy(&b0, b, 8);
    std::memcpy(&a1, a + n - 8, 8);
    std::memcpy(&b1, b + n - 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  static size_t RecentSlot(absl::string_view s) {
    return ((reinterpret_cast<uintptr_t>(s.data()) >> 3) ^ s.size()) % kRecentEntries;
  }
  // Not in the recent cache: by hash, else a new (or recycled) index; updates `recent`.
  Ref InternByValue(absl::string_view s, RecentEntry& recent);

  SlotRecycler recycler_;
  uint64_t redefinitions_ = 0;
  std::array<RecentEntry, kRecentEntries> recent_ = {};
  // values_[index] is what index currently means, up to the last index claimed (made as
  // indices are first claimed: most decodes use a small part of the table). Its capacity
  // is reserved once, so the keys of index_of_, which view these strings, never move.
  std::vector<std::string> values_;
  absl::flat_hash_map<absl::string_view, uint16_t> index_of_;
};

}  // namespace ptd::ftf
