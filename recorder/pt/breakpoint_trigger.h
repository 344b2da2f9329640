#pragma once
// Hardware execute breakpoints (PERF_TYPE_BREAKPOINT, HW_BREAKPOINT_X) for the triggers
// (recorder/session/trigger_policy.h decides which hit fires). The entry breakpoint on the
// symbol's runtime address is one perf event per (thread, CPU) with inherit set, so the
// threads and processes the target creates later are watched too (their samples go to
// the parent event's ring, with their tid); the events of one CPU share one ring
// (PERF_EVENT_IOC_SET_OUTPUT). The events count every hit (sample_period 1)
// and wake poll() at each; hits that land before the fds are polled wait in the rings.
//
// --trigger-slower-than: the entry samples also carry the stack pointer and the word it
// points at (the return address); WatchReturn then puts a per-thread breakpoint on that
// return address, whose hits (with the stack pointer after the return) close the call.
// x86 has four debug registers per thread: the entry and up to three return sites.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recorder/sideband/perf_event.h"
#include "recorder/images/elf_symbol.h"  // ResolveSymbolInProcess
#include "recorder/sideband/perf_mmap.h"

namespace ptd::pt {

// One breakpoint hit, from its sample (times on the perf clock, as the trace's).
struct BreakpointHit {
  int pid = -1;
  int tid = -1;
  uint64_t time = 0;
  uint64_t stack_pointer = 0;   // watch_returns only
  uint64_t return_address = 0;  // entry hits with watch_returns: the word at the stack pointer
  bool at_return = false;       // a WatchReturn breakpoint's hit
};

class BreakpointTrigger {
 public:
  // Opens the entry breakpoint for every thread in `tids` on every CPU in `cpus`.
  static absl::StatusOr<BreakpointTrigger> Create(uint64_t address, const std::vector<int>& tids,
                                                  const std::vector<int>& cpus, bool watch_returns);

  BreakpointTrigger(BreakpointTrigger&&) = default;
  BreakpointTrigger& operator=(BreakpointTrigger&&) = default;

  // The entry breakpoints' fds (WatchReturn gives the others as they are opened).
  std::vector<int> fds() const;
  // Call when `fd` polled readable (or hung up): the hits its ring holds (none: a
  // wake-up without a sample, e.g. the thread exited).
  absl::StatusOr<std::vector<BreakpointHit>> TakeHits(int fd);
  // A breakpoint on `return_address` in thread `tid`: its fd, to poll, or -1 when there
  // is one already.
  absl::StatusOr<int> WatchReturn(int tid, uint64_t return_address);
  uint64_t address() const { return address_; }
  uint64_t hits() const { return hits_; }

 private:
  struct Breakpoint {
    int tid = -1;
    int cpu = -1;
    uint64_t address = 0;
    bool at_return = false;
    PerfEvent event;
    PerfMmap ring;  // invalid: writes into its CPU's first breakpoint's ring
  };
  BreakpointTrigger(uint64_t address, bool watch_returns) : address_(address), watch_returns_(watch_returns) {}
  absl::Status Open(int tid, int cpu, uint64_t address, bool at_return);

  uint64_t address_ = 0;
  bool watch_returns_ = false;
  uint64_t hits_ = 0;
  std::vector<Breakpoint> breakpoints_;
};

}  // namespace ptd::pt
