#include "recorder/pt/breakpoint_trigger.h"

#include <linux/hw_breakpoint.h>

#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recorder/data_ring.h"
#include "recorder/elf_symbol.h"
#include "recorder/proc_maps.h"

namespace ptd::pt {

absl::StatusOr<BreakpointTrigger> BreakpointTrigger::Create(uint64_t address,
                                                            const std::vector<int>& tids) {
  BreakpointTrigger trigger(address);
  for (int tid : tids) {
    absl::Status st = trigger.AddThread(tid);
    // A thread that exited since the list was read is no error.
    if (!st.ok() && st.code() != absl::StatusCode::kNotFound) return st;
  }
  if (trigger.threads_.empty()) {
    return absl::NotFoundError("--trigger: no thread of the target is left to watch");
  }
  return trigger;
}

absl::Status BreakpointTrigger::AddThread(int tid) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_BREAKPOINT;
  attr.bp_type = HW_BREAKPOINT_X;
  attr.bp_addr = address_;
  attr.bp_len = sizeof(long);  // the kernel's rule for execute breakpoints
  attr.sample_period = 1;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID;
  attr.wakeup_events = 1;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  absl::StatusOr<PerfEvent> event = PerfEvent::Open(attr, tid, -1);
  if (!event.ok()) return event.status();
  // poll() on a perf fd without a ring always reports POLLHUP: a one-page ring it is.
  absl::StatusOr<PerfMmap> ring = PerfMmap::Map(*event, PageSize());
  if (!ring.ok()) return ring.status();
  threads_.push_back(ThreadBreakpoint{tid, *std::move(event), *std::move(ring)});
  return absl::OkStatus();
}

std::vector<int> BreakpointTrigger::fds() const {
  std::vector<int> out;
  for (const ThreadBreakpoint& t : threads_) out.push_back(t.event.fd());
  return out;
}

absl::Status BreakpointTrigger::Arm() {
  for (ThreadBreakpoint& t : threads_) {
    absl::Status st = t.event.Refresh(1);
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("--trigger: arming thread ", t.tid, ": ",
                                                  st.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> BreakpointTrigger::Reopen(int fd) {
  for (size_t i = 0; i < threads_.size(); ++i) {
    if (threads_[i].event.fd() != fd) continue;
    const int tid = threads_[i].tid;
    threads_.erase(threads_.begin() + static_cast<long>(i));  // unmaps and closes
    if (absl::Status st = AddThread(tid); !st.ok()) return st;
    return threads_.back().event.fd();
  }
  return absl::NotFoundError(absl::StrFormat("--trigger: fd %d is not a breakpoint", fd));
}

absl::Status BreakpointTrigger::Rearm(int fd) {
  for (ThreadBreakpoint& t : threads_) {
    if (t.event.fd() == fd) return t.event.Refresh(1);
  }
  return absl::NotFoundError(absl::StrFormat("--trigger: fd %d is not a breakpoint", fd));
}

absl::StatusOr<int> BreakpointTrigger::Consume(int fd) {
  for (ThreadBreakpoint& t : threads_) {
    if (t.event.fd() != fd) continue;
    DataRing ring(t.ring.header(), t.ring.data(), t.ring.data_size());
    std::string records;
    DataRingStats stats;
    absl::Status drained = ring.Drain(&records, &stats);
    if (!drained.ok()) return drained;
    int samples = 0;
    for (size_t at = 0; at + sizeof(perf_event_header) <= records.size();) {
      perf_event_header h;
      std::memcpy(&h, records.data() + at, sizeof(h));
      if (h.size == 0) break;
      if (h.type == PERF_RECORD_SAMPLE) samples++;
      at += h.size;
    }
    hits_ += samples;
    return samples;
  }
  return absl::NotFoundError(absl::StrFormat("--trigger: fd %d is not a breakpoint", fd));
}

}  // namespace ptd::pt
