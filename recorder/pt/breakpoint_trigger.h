#pragma once
// --trigger SYMBOL: a hardware execute breakpoint (PERF_TYPE_BREAKPOINT, HW_BREAKPOINT_X)
// on the symbol's runtime address, one perf event per thread of the target. Each event
// is single-shot: disabled at open and armed with PERF_EVENT_IOC_REFRESH 1, so it fires
// once, writes one sample into its small ring and wakes poll(). Arm() must come after
// the fds are in the poll set, or a hit between arming and polling would be missed.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recorder/perf_event.h"
#include "recorder/elf_symbol.h"  // ResolveSymbolInProcess
#include "recorder/perf_mmap.h"

namespace ptd::pt {

class BreakpointTrigger {
 public:
  // Opens a disabled breakpoint event on every thread in `tids`.
  static absl::StatusOr<BreakpointTrigger> Create(uint64_t address, const std::vector<int>& tids);

  BreakpointTrigger(BreakpointTrigger&&) = default;
  BreakpointTrigger& operator=(BreakpointTrigger&&) = default;

  // Adds a thread that appeared later (disabled; Arm() it after polling it).
  absl::Status AddThread(int tid);
  std::vector<int> fds() const;
  // IOC_REFRESH 1 on every event: one more hit each.
  absl::Status Arm();
  // After the event behind `fd` fired: replaces it by a fresh disabled event on the same
  // thread and returns the new fd (the old one is closed). Put the new fd in the poll set,
  // then Rearm() it. A fresh event because on the kernels tried (6.18) a breakpoint that
  // reached its IOC_REFRESH limit stays silent and reports POLLHUP after another refresh.
  absl::StatusOr<int> Reopen(int fd);
  // IOC_REFRESH 1 on the event behind `fd`.
  absl::Status Rearm(int fd);
  // Call when `fd` polled readable (or hung up): drains its ring and returns how many
  // hits it recorded (0: a wake-up without a sample, e.g. the thread exited).
  absl::StatusOr<int> Consume(int fd);
  uint64_t address() const { return address_; }
  uint64_t hits() const { return hits_; }

 private:
  struct ThreadBreakpoint {
    int tid = -1;
    PerfEvent event;
    PerfMmap ring;
  };
  explicit BreakpointTrigger(uint64_t address) : address_(address) {}

  uint64_t address_ = 0;
  uint64_t hits_ = 0;
  std::vector<ThreadBreakpoint> threads_;
};

}  // namespace ptd::pt
