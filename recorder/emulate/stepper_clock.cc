#include "recorder/emulate/stepper_clock.h"

#include <algorithm>

#include "common/monotonic_clock.h"

namespace ptd {

StepperClock::StepperClock(const StepperClockOptions& options) : options_(options) {}

uint64_t StepperClock::RealNow() const { return options_.real_clock ? options_.real_clock() : MonotonicNs(); }

StepperClock::Domain* StepperClock::DomainOf(int pid, std::optional<uint64_t> start) {
  auto& domain = domains_[options_.one_clock ? 0 : pid];
  if (domain == nullptr) {
    domain = std::make_unique<Domain>();
    domain->clock = start.value_or(options_.start_ns);
  }
  return domain.get();
}

StepperClock::ThreadState* StepperClock::State(int tid) {
  auto it = threads_.find(tid);
  if (it != threads_.end()) return &it->second;
  // Not announced (cannot happen in the stepper): a thread of a process of its own.
  AddThread(tid, tid);
  return &threads_[tid];
}

void StepperClock::AddPoint(ThreadState* state, uint64_t real, uint64_t virt) {
  state->spans.push_back(Span{real, real, virt, virt, false});
}

void StepperClock::AddThread(int pid, int tid) {
  if (options_.wall) return;
  std::optional<uint64_t> start;
  if (auto fork = fork_starts_.find(pid); fork != fork_starts_.end()) start = fork->second;
  ThreadState& state = threads_[tid];
  state.pid = pid;
  state.domain = DomainOf(pid, start);
  state.entering = state.in_call = state.await_resume = false;
  AddPoint(&state, RealNow(), state.domain->clock);
}

uint64_t StepperClock::InCall(uint64_t entry, uint64_t resumed, uint64_t real) {
  return entry + std::max(kRecordLeadNs, real > resumed ? real - resumed : 0);
}

void StepperClock::TaskCreated(int parent_tid, int child_pid, bool new_process) {
  if (options_.wall) return;
  ThreadState* parent = State(parent_tid);
  Domain* domain = parent->domain;
  uint64_t start = domain->clock;
  if (parent->in_call && parent->call_resumed != 0) {
    start = std::max(start, InCall(parent->call_entry, parent->call_resumed, RealNow()) + 1);
  }
  if (new_process && !options_.one_clock) {
    fork_starts_[child_pid] = start;
  } else {
    domain->clock = start;
  }
}

uint64_t StepperClock::Retire(int tid) {
  if (options_.wall) return RealNow();
  ThreadState* state = State(tid);
  state->entering = false;  // a syscall EnterKernel saw did not run (a signal came first)
  Domain* domain = state->domain;
  if (options_.one_clock) {
    if (domain->last_tid >= 0 && domain->last_tid != tid) domain->clock += kThreadChangeNs;
    domain->last_tid = tid;
  }
  return domain->clock++;
}

uint64_t StepperClock::Now(int tid) {
  if (options_.wall) return RealNow();
  return State(tid)->domain->clock;
}

uint64_t StepperClock::EnterKernel(int tid, uint64_t insn_time) {
  if (options_.wall) return insn_time;
  ThreadState* state = State(tid);
  state->entering = true;
  state->call_entry = state->domain->clock;
  state->domain->clock += kMinSyscallNs;
  return state->call_entry;
}

void StepperClock::SyscallEntryStop(int tid) {
  if (options_.wall) return;
  ThreadState* state = State(tid);
  if (!state->entering) {
    // A call restarted by the kernel after an attach: it enters the kernel now.
    state->call_entry = state->domain->clock;
    state->domain->clock += kMinSyscallNs;
  }
  state->entering = false;
  state->in_call = true;
  state->call_resumed = 0;
  state->await_resume = true;
}

void StepperClock::Resumed(int tid) {
  if (options_.wall) return;
  ThreadState* state = State(tid);
  state->resumed = RealNow();
  if (state->await_resume) {
    state->call_resumed = state->resumed;
    state->await_resume = false;
  }
}

void StepperClock::StepEnded(int tid) {
  if (options_.wall) return;
  ThreadState* state = State(tid);
  if (state->resumed == 0) return;
  min_round_trip_ = std::min(min_round_trip_, RealNow() - state->resumed);
}

void StepperClock::CloseCall(ThreadState* state, uint64_t now) {
  uint64_t took = 0;
  if (state->call_resumed != 0 && now > state->call_resumed) {
    took = now - state->call_resumed;
    // What a single step costs, its resume and its stop, is ptrace's, not the call's.
    if (min_round_trip_ != UINT64_MAX) took -= std::min(took, min_round_trip_);
  }
  Domain* domain = state->domain;
  domain->clock = std::max(domain->clock, state->call_entry + took);
  const uint64_t r0 = state->call_resumed != 0 ? state->call_resumed : now;
  state->spans.push_back(Span{r0, std::max(r0, now), state->call_entry, domain->clock, true});
  state->in_call = state->await_resume = false;
}

void StepperClock::SyscallExitStop(int tid) {
  if (options_.wall) return;
  ThreadState* state = State(tid);
  if (state->in_call) CloseCall(state, RealNow());
}

uint64_t StepperClock::ThreadEnded(int tid) {
  if (options_.wall) return RealNow();
  ThreadState* state = State(tid);
  const uint64_t now = RealNow();
  if (state->in_call) CloseCall(state, now);
  state->entering = false;
  AddPoint(state, now, state->domain->clock);
  return state->domain->clock;
}

uint64_t StepperClock::Newest() {
  if (options_.wall) return RealNow();
  uint64_t newest = options_.start_ns;
  for (const auto& [key, domain] : domains_) newest = std::max(newest, domain->clock);
  return newest;
}

uint64_t StepperClock::AlignAll() {
  const uint64_t newest = Newest();
  if (options_.wall) return newest;
  for (auto& [key, domain] : domains_) domain->clock = newest;
  return newest;
}

std::optional<uint64_t> StepperClock::Nearest(const std::vector<Span>& spans, uint64_t real) {
  if (spans.empty()) return std::nullopt;
  auto next = std::upper_bound(spans.begin(), spans.end(), real,
                               [](uint64_t r, const Span& s) { return r < s.r0; });
  if (next == spans.begin()) return next->v0 > 0 ? next->v0 - 1 : 0;
  const Span& previous = *(next - 1);
  if (real <= previous.r1) {
    return previous.call ? std::min(InCall(previous.v0, previous.r0, real), previous.v1 - 1) : previous.v1;
  }
  if (next == spans.end() || real - previous.r1 <= next->r0 - real) return previous.v1;
  return next->v0;
}

void StepperClock::BuildFallbacks() {
  fallbacks_built_ = true;
  auto by_real = [](const Span& a, const Span& b) { return a.r0 < b.r0; };
  for (const auto& [tid, state] : threads_) {
    std::vector<Span>& process = process_points_[state.pid];
    process.insert(process.end(), state.spans.begin(), state.spans.end());
    all_points_.insert(all_points_.end(), state.spans.begin(), state.spans.end());
  }
  for (auto& [pid, spans] : process_points_) std::stable_sort(spans.begin(), spans.end(), by_real);
  std::stable_sort(all_points_.begin(), all_points_.end(), by_real);
}

uint64_t StepperClock::ToVirtual(int pid, int tid, uint64_t real_ns) {
  if (options_.wall) return real_ns;
  if (auto it = threads_.find(tid); it != threads_.end() && it->second.pid == pid) {
    if (std::optional<uint64_t> v = Nearest(it->second.spans, real_ns)) return *v;
  }
  if (!fallbacks_built_) BuildFallbacks();
  if (auto it = process_points_.find(pid); it != process_points_.end()) {
    if (std::optional<uint64_t> v = Nearest(it->second, real_ns)) return *v;
  }
  return Nearest(all_points_, real_ns).value_or(options_.start_ns);
}

}  // namespace ptd
