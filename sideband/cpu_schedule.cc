#include "sideband/cpu_schedule.h"

#include <algorithm>

namespace ptd {

void CpuSchedule::SwitchIn(CpuState& state, int cpu, int pid, int tid, uint64_t time_ns) {
  if (state.running && state.running->tid == tid) {
    state.last_event_ns = time_ns;
    return;
  }
  // A switch in while another thread is marked running means its switch out was lost;
  // it certainly stopped by now.
  if (state.running) {
    state.running->end_ns = time_ns;
    state.closed.push_back(*state.running);
  }
  state.running = CpuInterval{cpu, tid, pid, time_ns, kForever};
  state.last_event_ns = time_ns;
}

void CpuSchedule::SwitchOut(CpuState& state, int cpu, int pid, int tid, uint64_t time_ns) {
  if (state.running && state.running->tid == tid) {
    state.running->end_ns = time_ns;
    state.closed.push_back(*state.running);
  } else {
    // Its switch in was not seen (it ran before the recording, or records were lost):
    // it ran at least since the previous switch on this CPU.
    if (state.running) {
      state.running->end_ns = state.last_event_ns;
      state.closed.push_back(*state.running);
    }
    state.closed.push_back(CpuInterval{cpu, tid, pid, state.last_event_ns, time_ns});
  }
  state.running.reset();
  state.last_event_ns = time_ns;
}

void CpuSchedule::AddSwitch(int cpu, int pid, int tid, bool out, uint64_t time_ns) {
  CpuState& state = cpus_[cpu];
  if (out) {
    SwitchOut(state, cpu, pid, tid, time_ns);
  } else {
    SwitchIn(state, cpu, pid, tid, time_ns);
  }
}

void CpuSchedule::AddSwitchCpuWide(int cpu, int pid, int tid, bool out, int next_prev_pid,
                                   int next_prev_tid, uint64_t time_ns) {
  CpuState& state = cpus_[cpu];
  if (out) {
    // The record is written in the outgoing task's context; the incoming one gets its
    // own switch-in record, whose time is when it really starts.
    SwitchOut(state, cpu, pid, tid, time_ns);
  } else {
    // The first record of this CPU: the task switched from ran since before the
    // recording (a lost switch-out of a running task is handled by SwitchIn).
    if (!state.running && state.closed.empty() && next_prev_tid >= 0) {
      state.closed.push_back(CpuInterval{cpu, next_prev_tid, next_prev_pid, 0, time_ns});
    }
    SwitchIn(state, cpu, pid, tid, time_ns);
  }
}

std::optional<CpuInterval> CpuSchedule::ThreadAt(int cpu, uint64_t time_ns) const {
  auto it = cpus_.find(cpu);
  if (it == cpus_.end()) return std::nullopt;
  const CpuState& state = it->second;
  if (state.running && state.running->begin_ns <= time_ns) return state.running;
  // Closed intervals are in time order and don't overlap: the last one beginning at or
  // before time_ns is the only candidate.
  auto after = std::upper_bound(
      state.closed.begin(), state.closed.end(), time_ns,
      [](uint64_t t, const CpuInterval& interval) { return t < interval.begin_ns; });
  while (after != state.closed.begin()) {
    --after;
    if (time_ns < after->end_ns) return *after;
    if (after->begin_ns < after->end_ns) break;  // skip empty intervals at the same time
  }
  return std::nullopt;
}

std::vector<CpuInterval> CpuSchedule::Intervals(int cpu) const {
  std::vector<CpuInterval> result;
  auto it = cpus_.find(cpu);
  if (it == cpus_.end()) return result;
  result = it->second.closed;
  if (it->second.running) result.push_back(*it->second.running);
  return result;
}

std::vector<CpuInterval> CpuSchedule::AllIntervals() const {
  std::vector<CpuInterval> result;
  for (const auto& [cpu, state] : cpus_) {
    std::vector<CpuInterval> one = Intervals(cpu);
    result.insert(result.end(), one.begin(), one.end());
  }
  return result;
}

std::vector<int> CpuSchedule::Cpus() const {
  std::vector<int> cpus;
  for (const auto& [cpu, state] : cpus_) cpus.push_back(cpu);
  return cpus;
}

}  // namespace ptd
