#pragma once
// One memory mapping of a process as reported by MMAP/MMAP2 (or synthesized from
// /proc/PID/maps), with the time interval during which it was in place.

#include <cstdint>
#include <limits>
#include <string>

namespace ptd {

inline constexpr uint64_t kForever = std::numeric_limits<uint64_t>::max();

struct Mapping {
  uint64_t start = 0;  // first byte
  uint64_t end = 0;    // one past the last byte
  uint64_t pgoff = 0;  // file offset of `start`
  std::string path;    // file name as the kernel reported it ("[vdso]", "//anon" ...)
  uint32_t prot = 0;   // PROT_* (MMAP2 only; PROT_EXEC assumed for MMAP without data flag)
  uint32_t flags = 0;  // MAP_* (MMAP2 only)
  bool executable = true;
  std::string build_id;  // hex, when the MMAP2 carried one
  uint32_t maj = 0, min = 0;
  uint64_t ino = 0;
  // Valid for begin_ns <= t < end_ns (end_ns = kForever while still mapped).
  uint64_t begin_ns = 0;
  uint64_t end_ns = kForever;
};

}  // namespace ptd
