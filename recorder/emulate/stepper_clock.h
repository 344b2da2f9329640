#pragma once
// The time axis of the ptrace stepper's trace, and the map that puts the kernel's
// sideband records (CLOCK_MONOTONIC) on it.
//
// Wall: CLOCK_MONOTONIC when a step is seen (CPU work slowed by single-stepping).
// Virtual (default), the Valgrind backend's semantics: each process has a clock that
// advances 1 ns per instruction its threads retire; a system call lasts the real time its
// thread spent in it, at least kMinSyscallNs: from the resume at its syscall-entry stop to
// its syscall-exit stop, less ptrace's own cost (the shortest resume-to-stop round trip of
// a single step seen so far). A thread that blocks lets the others run; when it returns,
// its process's clock is at least the call's kernel entry plus its length. A forked child's
// clock starts at its parent's fork; an exec'd program continues its process's clock. With
// one_clock (virtual CPUs) every process shares one clock, so that the packets of each
// virtual CPU stay in time order, and a change of the thread that retires costs
// kThreadChangeNs, the room a context switch's packets and records need.
//
// Every record the kernel writes for a traced thread is made while that thread is in a
// system call (mmap, execve, clone, exit) or before/after the thread ran: ToVirtual puts a
// record made during a call inside that call, at least kRecordLeadNs after its kernel
// entry (more than the decoder reads ahead, so the code before the call decodes with the
// image as it was) and before the thread's next instruction, in the order of the records'
// real times; any other record at the nearest point the stepper knows of its thread, of
// its process, or of the recording (records before a thread's first instruction 1 ns
// before it).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace ptd {

struct StepperClockOptions {
  bool wall = false;
  bool one_clock = false;  // virtual CPUs: one clock for every process
  uint64_t start_ns = 1000;  // virtual time of the first instruction of a process not forked
  std::function<uint64_t()> real_clock;  // the real time in ns (null: CLOCK_MONOTONIC)
};

class StepperClock {
 public:
  static constexpr uint64_t kMinSyscallNs = 1000;
  static constexpr uint64_t kRecordLeadNs = 500;
  static constexpr uint64_t kThreadChangeNs = 3;

  explicit StepperClock(const StepperClockOptions& options);

  bool wall() const { return options_.wall; }
  // A thread the stepper traces from now on (a new process starts at start_ns, or at the
  // time ForkedProcess gave it).
  void AddThread(int pid, int tid);
  // At the clone/fork event stop of `parent_tid`, inside that call: the kernel's FORK
  // record is written, and the new task's first instruction comes after the time the
  // record is placed at. A new process (`new_process`: fork, vfork) starts its clock there.
  void TaskCreated(int parent_tid, int child_pid, bool new_process);

  // The time of an instruction `tid` retired (its process's clock advances 1 ns).
  uint64_t Retire(int tid);
  // How long an instruction takes: 1 ns on the virtual axis (it retires then); unknown,
  // 0, on the wall axis.
  uint64_t InstructionLength() const { return options_.wall ? 0 : 1; }
  // The time of `tid`'s next instruction (nothing advances).
  uint64_t Now(int tid);
  // The syscall instruction `tid` just retired at `insn_time` (Retire) enters the kernel:
  // returns the time of the entry (1 ns after the instruction on the virtual axis, so that
  // the instruction has its 1 ns; `insn_time` on the wall axis), which the kernel's work
  // and the next instruction follow.
  uint64_t EnterKernel(int tid, uint64_t insn_time);
  // The syscall-entry stop of a call EnterKernel did not see (a call restarted after an
  // attach): the call enters the kernel now.
  void SyscallEntryStop(int tid);
  // Just before `tid` is resumed (PTRACE_SINGLESTEP / SYSCALL / CONT).
  void Resumed(int tid);
  // A single step of `tid` ended (no system call in it): ptrace's own round trip.
  void StepEnded(int tid);
  // The syscall-exit stop of `tid`: the call took what it took.
  void SyscallExitStop(int tid);
  // `tid` is gone or detached (a call it is in ends now); returns its end time.
  uint64_t ThreadEnded(int tid);
  // A time at which every thread may be disabled (snapshots): the newest clock, which
  // every clock is brought up to so that no stream goes back in time after it.
  uint64_t AlignAll();
  // The newest time of any clock (wall: now).
  uint64_t Newest();

  // The virtual time of a sideband record of (pid, tid) made at real time `real_ns`. Wall
  // axis: `real_ns`.
  uint64_t ToVirtual(int pid, int tid, uint64_t real_ns);

 private:
  struct Domain {
    uint64_t clock = 0;
    int last_tid = -1;  // one_clock: the thread that retired last
  };
  // A point of a thread's time on both axes, or a system call: real [r0, r1] is virtual
  // [v0, v1) (v0: kernel entry, v1: the next instruction).
  struct Span {
    uint64_t r0 = 0, r1 = 0, v0 = 0, v1 = 0;
    bool call = false;
  };
  struct ThreadState {
    int pid = -1;
    Domain* domain = nullptr;
    bool entering = false;        // EnterKernel was called; its entry stop is due
    bool await_resume = false;    // at an entry stop: the next resume starts the call's work
    bool in_call = false;         // between a syscall-entry stop and the call's end
    uint64_t call_entry = 0;      // virtual kernel entry of the current (or entering) call
    uint64_t call_resumed = 0;    // real time it was resumed at its entry stop (0: not yet)
    uint64_t resumed = 0;         // real time of the latest resume
    std::vector<Span> spans;      // points and calls, in real-time order
  };
  uint64_t RealNow() const;
  ThreadState* State(int tid);
  Domain* DomainOf(int pid, std::optional<uint64_t> start);
  void AddPoint(ThreadState* state, uint64_t real, uint64_t virt);
  // Where the kernel's work at real `real` of the call `state` is in lands (before v1).
  static uint64_t InCall(uint64_t entry, uint64_t resumed, uint64_t real);
  void CloseCall(ThreadState* state, uint64_t now);
  // The point of `spans` nearest `real` (records outside calls); nullopt: no point.
  static std::optional<uint64_t> Nearest(const std::vector<Span>& spans, uint64_t real);
  void BuildFallbacks();

  StepperClockOptions options_;
  std::unordered_map<int, std::unique_ptr<Domain>> domains_;  // by pid (one_clock: key 0)
  std::unordered_map<int, uint64_t> fork_starts_;            // child pid -> its clock's start
  std::unordered_map<int, ThreadState> threads_;
  uint64_t min_round_trip_ = UINT64_MAX;
  // ToVirtual's fallbacks, built at its first call: every point per process and overall.
  bool fallbacks_built_ = false;
  std::unordered_map<int, std::vector<Span>> process_points_;
  std::vector<Span> all_points_;
};

}  // namespace ptd
