#pragma once
// CLOCK_MONOTONIC now: the emulators' wall clock and the recorders' deadlines.
#include <time.h>

#include <cstdint>

namespace ptd {

inline uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline double MonotonicSeconds() { return static_cast<double>(MonotonicNs()) * 1e-9; }

}  // namespace ptd
