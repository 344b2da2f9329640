#include "recorder/pt/breakpoint_trigger.h"

#include <asm/perf_regs.h>
#include <linux/hw_breakpoint.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recorder/sideband/data_ring.h"

namespace ptd::pt {
namespace {

uint64_t ReadU64(const std::string& bytes, size_t at) {
  uint64_t v = 0;
  if (at + 8 <= bytes.size()) std::memcpy(&v, bytes.data() + at, 8);
  return v;
}

}  // namespace

absl::StatusOr<BreakpointTrigger> BreakpointTrigger::Create(uint64_t address, const std::vector<int>& tids,
                                                            const std::vector<int>& cpus, bool watch_returns) {
  BreakpointTrigger trigger(address, watch_returns);
  for (int tid : tids) {
    for (int cpu : cpus) {
      absl::Status st = trigger.Open(tid, cpu, address, /*at_return=*/false);
      // A thread that exited since the list was read is no error.
      if (!st.ok() && st.code() != absl::StatusCode::kNotFound) return st;
    }
  }
  if (trigger.breakpoints_.empty()) {
    return absl::NotFoundError("--trigger: no thread of the target is left to watch");
  }
  return trigger;
}

absl::Status BreakpointTrigger::Open(int tid, int cpu, uint64_t address, bool at_return) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_BREAKPOINT;
  attr.bp_type = HW_BREAKPOINT_X;
  attr.bp_addr = address;
  attr.bp_len = sizeof(long);  // the kernel's rule for execute breakpoints
  attr.sample_period = 1;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  if (watch_returns_) {
    attr.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    attr.sample_regs_user = uint64_t{1} << PERF_REG_X86_SP;
    attr.sample_stack_user = 8;  // the return address, at an entry
  }
  attr.wakeup_events = 1;
  // Per (thread, CPU) the entry breakpoint follows the threads created later; mmap of
  // an inherited event needs a CPU. A return site is one thread's.
  attr.inherit = cpu >= 0 ? 1 : 0;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  absl::StatusOr<PerfEvent> event = PerfEvent::Open(attr, tid, cpu);
  if (!event.ok()) return event.status();
  // One ring per CPU (the locked-memory limit): the CPU's other breakpoints write into
  // it, as perf's events on one CPU do.
  if (cpu >= 0) {
    for (const Breakpoint& b : breakpoints_) {
      if (b.cpu != cpu || !b.ring.valid()) continue;
      if (absl::Status st = event->SetOutput(b.event); !st.ok()) return st;
      breakpoints_.push_back(Breakpoint{tid, cpu, address, at_return, *std::move(event), PerfMmap()});
      return absl::OkStatus();
    }
  }
  // poll() on a perf fd without a ring always reports POLLHUP: a ring it is.
  absl::StatusOr<PerfMmap> ring = PerfMmap::Map(*event, 2 * PageSize());
  if (!ring.ok()) return ring.status();
  breakpoints_.push_back(Breakpoint{tid, cpu, address, at_return, *std::move(event), *std::move(ring)});
  return absl::OkStatus();
}

std::vector<int> BreakpointTrigger::fds() const {
  std::vector<int> out;
  for (const Breakpoint& b : breakpoints_) {
    if (!b.at_return && b.ring.valid()) out.push_back(b.event.fd());
  }
  return out;
}

absl::StatusOr<int> BreakpointTrigger::WatchReturn(int tid, uint64_t return_address) {
  for (const Breakpoint& b : breakpoints_) {
    if (b.at_return && b.tid == tid && b.address == return_address) return -1;
  }
  if (absl::Status st = Open(tid, -1, return_address, /*at_return=*/true); !st.ok()) {
    return absl::Status(st.code(), absl::StrFormat("--trigger-slower-than: a breakpoint on the return "
                                                   "address 0x%x in thread %d: %s",
                                                   return_address, tid, st.message()));
  }
  return breakpoints_.back().event.fd();
}

absl::StatusOr<std::vector<BreakpointHit>> BreakpointTrigger::TakeHits(int fd) {
  for (Breakpoint& b : breakpoints_) {
    if (b.event.fd() != fd || !b.ring.valid()) continue;
    DataRing ring(b.ring.header(), b.ring.data(), b.ring.data_size());
    std::string records;
    DataRingStats stats;
    absl::Status drained = ring.Drain(&records, &stats);
    if (!drained.ok()) return drained;
    std::vector<BreakpointHit> hits;
    for (size_t at = 0; at + sizeof(perf_event_header) <= records.size();) {
      perf_event_header h;
      std::memcpy(&h, records.data() + at, sizeof(h));
      if (h.size == 0 || at + h.size > records.size()) break;
      if (h.type == PERF_RECORD_SAMPLE) {
        // ip, pid/tid, time, then (watch_returns) regs_user {abi, sp} and stack_user
        // {size, bytes, dyn_size}: the layout perf_event_open(2) gives for this sample_type.
        size_t p = at + sizeof(h) + 8;
        BreakpointHit hit;
        uint32_t ids[2] = {0, 0};
        if (p + 8 <= records.size()) std::memcpy(ids, records.data() + p, 8);
        hit.pid = static_cast<int>(ids[0]);
        hit.tid = static_cast<int>(ids[1]);
        hit.time = ReadU64(records, p + 8);
        hit.at_return = b.at_return;
        p += 16;
        if (watch_returns_) {
          const uint64_t abi = ReadU64(records, p);
          p += 8;
          if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
            hit.stack_pointer = ReadU64(records, p);
            p += 8;
          }
          const uint64_t stack_size = ReadU64(records, p);
          p += 8;
          if (stack_size >= 8 && ReadU64(records, p + stack_size) >= 8) hit.return_address = ReadU64(records, p);
        }
        hits.push_back(hit);
      }
      at += h.size;
    }
    hits_ += hits.size();
    return hits;
  }
  return absl::NotFoundError(absl::StrFormat("--trigger: fd %d is not a breakpoint", fd));
}

}  // namespace ptd::pt
