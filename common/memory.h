#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace ptd {

// Maps the pages of [data, data + bytes) for writing in one system call instead of a
// page fault each (on the VMs measured, a first touch costs ~4 µs). Only whole pages
// inside the range; a no-op where the kernel cannot (before Linux 5.14) or for ranges
// under kMinPrefaultBytes, where the call costs more than the faults it saves.
void PrefaultForWrite(void* data, size_t bytes);
inline constexpr size_t kMinPrefaultBytes = size_t{64} << 10;

// v.push_back(x), for a vector reserved well beyond what it will hold (so prefaulting all
// of it would touch pages never used): each kMinPrefaultBytes of its room is prefaulted
// as the first element goes into it.
template <class T, class A>
void PushBackPrefaulted(std::vector<T, A>& v, const T& x) {
  constexpr size_t kStep = (kMinPrefaultBytes + sizeof(T) - 1) / sizeof(T);
  const size_t size = v.size();
  if (size % kStep == 0 && size + kStep <= v.capacity()) [[unlikely]] {
    PrefaultForWrite(v.data() + size, kStep * sizeof(T));
  }
  v.push_back(x);
}

// std::allocator whose large allocations come prefaulted: for containers that write all
// of a new allocation at once (a hash table's rehash, a vector's regrowth copy).
template <class T>
struct PrefaultingAllocator : std::allocator<T> {
  using value_type = T;
  PrefaultingAllocator() = default;
  template <class U>
  PrefaultingAllocator(const PrefaultingAllocator<U>&) noexcept {}
  template <class U>
  struct rebind {
    using other = PrefaultingAllocator<U>;
  };
  T* allocate(size_t n) {
    T* p = std::allocator<T>::allocate(n);
    PrefaultForWrite(p, n * sizeof(T));
    return p;
  }
  template <class U>
  bool operator==(const PrefaultingAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace ptd
