#pragma once
// The values last looked up by address, direct-mapped in front of a hash map: the same
// few addresses (a hot loop's blocks, the call and syscall sites) come back again and
// again, and a hit is a load and a compare instead of a probe.

#include <array>
#include <cstddef>
#include <cstdint>

namespace ptd {

template <class Value, size_t kSlots>
class RecentByAddress {
  static_assert((kSlots & (kSlots - 1)) == 0, "kSlots must be a power of two");

 public:
  // The value kept for `address`, or null.
  const Value* Find(uint64_t address) const {
    const Slot& slot = slots_[Index(address)];
    return slot.valid && slot.address == address ? &slot.value : nullptr;
  }
  // Keeps `value` for `address` (replacing what its slot held); the value kept.
  const Value& Put(uint64_t address, const Value& value) {
    Slot& slot = slots_[Index(address)];
    slot = {address, value, true};
    return slot.value;
  }
  void Clear() { slots_.fill(Slot()); }

 private:
  struct Slot {
    uint64_t address = 0;
    Value value{};
    bool valid = false;
  };
  static size_t Index(uint64_t address) { return (address ^ (address >> 12)) & (kSlots - 1); }
  std::array<Slot, kSlots> slots_{};
};

}  // namespace ptd
