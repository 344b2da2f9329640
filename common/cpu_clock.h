#pragma once
// CPU time, for the decode's cost counters (--stats-json): a thread's own (the work of
// one piece or phase, unaffected by other threads on a shared machine) and the process's.
#include <time.h>

#include <cstdint>

namespace ptd {

inline uint64_t CpuClockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// CPU time of the calling thread.
inline uint64_t ThreadCpuNs() { return CpuClockNs(CLOCK_THREAD_CPUTIME_ID); }

// CPU time of every thread of the process, ended ones included.
inline uint64_t ProcessCpuNs() { return CpuClockNs(CLOCK_PROCESS_CPUTIME_ID); }

}  // namespace ptd
