#pragma once
// Chooses which index of a fixed-size FTF table (strings, threads) to define next: unused
// indices first, then the least recently used one (clock / second-chance approximation),
// never one that the record being built already refers to.

#include <cstdint>
#include <vector>

namespace ptd::ftf {

// What a table's Intern returns: the index a record may refer to.
template <typename Index>
struct InternedRef {
  Index index = 0;
  // The caller must write the record defining `index` (string or thread) before the
  // record using it.
  bool needs_definition = false;
};

class SlotRecycler {
 public:
  // Indices are 1..capacity (0 is reserved by the format).
  explicit SlotRecycler(uint32_t capacity);

  // Marks `index` as used by the current record: it is then safe until NextRecord().
  void Touch(uint32_t index) {
    slots_[index].referenced = true;
    slots_[index].pinned_record = record_;
  }
  // Starts a new record; indices touched before may be recycled again.
  void NextRecord() { ++record_; }
  // Returns the index to (re)define and touches it. The caller must forget what the
  // index meant before. Requires capacity > the number of indices one record touches.
  uint32_t Claim();
  uint32_t capacity() const { return capacity_; }

 private:
  struct Slot {
    bool referenced = false;
    uint64_t pinned_record = 0;
  };
  uint32_t capacity_;
  uint32_t next_unused_ = 1;
  uint32_t hand_ = 1;
  uint64_t record_ = 1;  // starts above every Slot::pinned_record
  // By index, up to the last one claimed: made as indices are first claimed, since most
  // decodes use a small part of a string table of 32767.
  std::vector<Slot> slots_;
};

}  // namespace ptd::ftf
