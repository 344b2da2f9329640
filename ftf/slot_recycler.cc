#include "ftf/slot_recycler.h"

namespace ptd::ftf {

SlotRecycler::SlotRecycler(uint32_t capacity) : capacity_(capacity), slots_(1) {}

uint32_t SlotRecycler::Claim() {
  if (next_unused_ <= capacity_) {
    uint32_t index = next_unused_++;
    slots_.emplace_back();
    Touch(index);
    return index;
  }
  // Each pass clears "referenced" bits, so after at most two passes an unpinned slot
  // is found (the caller guarantees fewer pins than slots).
  for (;;) {
    uint32_t index = hand_;
    hand_ = hand_ == capacity_ ? 1 : hand_ + 1;
    Slot& slot = slots_[index];
    if (slot.pinned_record == record_) continue;
    if (slot.referenced) {
      slot.referenced = false;
      continue;
    }
    Touch(index);
    return index;
  }
}

}  // namespace ptd::ftf
