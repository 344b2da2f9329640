#pragma once
// Which thread ran on which CPU when, from context-switch records: PERF_RECORD_SWITCH
// (per-thread events; the thread and CPU come from sample_id) and SWITCH_CPU_WIDE.

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "sideband/mapping.h"

namespace ptd {

struct CpuInterval {
  int cpu = -1;
  int tid = -1;
  int pid = -1;
  uint64_t begin_ns = 0;        // 0 when it was already running before the first record
  uint64_t end_ns = kForever;   // kForever when still running at the last record
};

class CpuSchedule {
 public:
  // Events, in time order. `out` is misc SWITCH_OUT. For a switch in, `tid` starts
  // running on `cpu` at `time_ns`; for a switch out, it stops.
  void AddSwitch(int cpu, int pid, int tid, bool out, uint64_t time_ns);
  // SWITCH_CPU_WIDE: pid/tid from sample_id are the task the record was written for;
  // next_prev_* is the task switched to (out) or from (in).
  void AddSwitchCpuWide(int cpu, int pid, int tid, bool out, int next_prev_pid,
                        int next_prev_tid, uint64_t time_ns);

  // The thread running on `cpu` at `time_ns`.
  std::optional<CpuInterval> ThreadAt(int cpu, uint64_t time_ns) const;
  // Intervals of one CPU in time order, including one still open.
  std::vector<CpuInterval> Intervals(int cpu) const;
  // All intervals of all CPUs, by CPU then time.
  std::vector<CpuInterval> AllIntervals() const;
  std::vector<int> Cpus() const;

 private:
  struct CpuState {
    std::vector<CpuInterval> closed;
    std::optional<CpuInterval> running;
    uint64_t last_event_ns = 0;
  };
  void SwitchIn(CpuState& state, int cpu, int pid, int tid, uint64_t time_ns);
  void SwitchOut(CpuState& state, int cpu, int pid, int tid, uint64_t time_ns);

  std::map<int, CpuState> cpus_;
};

}  // namespace ptd
