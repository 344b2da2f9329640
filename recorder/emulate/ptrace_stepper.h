#pragma once
// Front end 1 of the emulator: single-steps every thread of the traced processes with
// ptrace and reports each retired instruction (classified by the x86 decoder, image/insn_classifier.h, from the tracee's
// own bytes) to the PT streams and the ground truth. An instruction counts as retired
// when the thread's RIP moved; RIP then is the "next IP" Intel PT would encode. Signal
// delivery is detected from the ptrace stop that follows an injected signal (si_code
// SIGTRAP: the kernel stopped at the handler's first instruction) and becomes an
// asynchronous disable + enable at the handler, as on hardware.

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <unordered_map>
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recorder/emulate/ground_truth_writer.h"
#include "image/insn_classifier.h"
#include "recorder/ptgen/pt_stream_set.h"
#include "recorder/emulate/stack_frame_tracker.h"
#include "recorder/emulate/stepper_clock.h"

namespace ptd {

class JitCodeCapture;

struct PtraceStepperOptions {
  // 0: trace from the first instruction. Otherwise run freely until the initial thread
  // reaches this address (int3), then trace from there.
  uint64_t start_address = 0;
  double duration_s = 0;      // stop after this long (0: until every thread is gone)
  bool progress = false;      // steps/s status line on stderr
  bool kill_on_exit = false;  // PTRACE_O_EXITKILL: launched targets die with the recorder
  bool follow_forks = true;   // false (--no-follow): forked children run untraced
  // Called for every thread that appears (per-thread sideband needs a ring for it).
  std::function<void(int tid)> on_new_thread;
  // --start-at in a library not loaded yet: with start_address 0 and this set, the
  // target runs with PTRACE_SYSCALL and the resolver is asked again after every mmap
  // until it finds the address (NotFound: not yet); tracing begins there.
  std::function<absl::StatusOr<uint64_t>()> resolve_start;
  // Requests (snapshots, stops) from signals, the control FIFO, --duration: while
  // *requests_pending reads true, serve_requests runs on the stepper's thread before the
  // next wait (EmulationControl interrupts a blocked wait).
  const std::atomic<bool>* requests_pending = nullptr;
  std::function<void()> serve_requests;
  // --trigger: on_trigger(pid, tid, sp, time) runs when a traced thread is about to
  // execute the address resolve_trigger returns (asked at start, when --start-at is
  // reached and after every mmap until it is found); sp points at the return address.
  std::function<absl::StatusOr<uint64_t>()> resolve_trigger;
  std::function<void(int pid, int tid, uint64_t stack_pointer, uint64_t time)> on_trigger;
  // When set, runs after every traced step with the thread's new stack pointer (the
  // trigger's returns are seen there), before on_trigger.
  std::function<void(int pid, int tid, uint64_t stack_pointer, uint64_t time)> on_step;
  // Captures the code run from memory no file backs (JIT code); null: none captured.
  JitCodeCapture* jit_capture = nullptr;
  // When set, runs on the stepper's thread between two stops, at most every
  // periodic_every_s (--cgroup: processes that joined are attached here).
  std::function<void()> periodic;
  double periodic_every_s = 0.1;
  // The trace's time axis (wall or virtual); every time the stepper hands on is on it.
  StepperClockOptions clock;
};

struct PtraceStepperStats {
  uint64_t steps = 0;
  uint64_t instructions = 0;  // traced (in the PT streams)
  uint64_t lost_instructions = 0;  // executed but lost to injected overflows
  uint64_t threads = 0;
  uint64_t processes = 0;
  uint64_t signals_delivered = 0;
  uint64_t undecodable = 0;
  uint64_t code_read_failures = 0;
  uint64_t syscalls = 0;
  uint64_t cache_invalidations = 0;
  double seconds = 0;
  bool start_reached = false;
};

class PtraceStepper {
 public:
  // `streams` must outlive the stepper; `truth` may be null.
  PtraceStepper(const PtraceStepperOptions& options, PtStreamSet* streams,
                GroundTruthWriter* truth);
  ~PtraceStepper();

  // A thread this thread is the ptrace tracer of, currently in a ptrace stop (after
  // exec, or after PTRACE_ATTACH's SIGSTOP). Sets the ptrace options.
  absl::Status AddStoppedThread(int pid, int tid);

  // Steps until every traced thread has ended, the duration is over or RequestStop().
  // Threads still alive then are detached (and keep running).
  absl::Status Run();

  // Ends Run() soon; `reason` (a string literal) becomes end_reason(). Async-signal-safe.
  void RequestStop(const char* reason = "sigint") {
    stop_reason_.store(reason);
    stop_requested_.store(true);
  }

  const PtraceStepperStats& stats() const { return stats_; }
  // Wait status of `pid` if it exited while traced (-1 otherwise).
  int exit_status(int pid) const;
  // True while a thread of process `pid` is traced.
  bool TracesProcess(int pid) const;
  // "exit", "duration", "error", or the reason given to RequestStop.
  const char* end_reason() const { return end_reason_; }
  // The trigger address once resolved (0: not yet / none).
  uint64_t trigger_address() const { return trigger_address_; }
  // The trace's clock: snapshots take their time from it, the sideband is mapped onto it.
  StepperClock& clock() { return clock_; }

 private:
  struct AddressSpace;
  struct Thread;
  struct ExecutableRange;

  Thread* NewThread(int pid, int tid);
  AddressSpace* SpaceFor(int pid);
  absl::Status HandleStop(Thread* thread, int status);
  absl::Status OnRegisters(Thread* thread, bool handler_entry, int signo);
  void LoadInstruction(Thread* thread);
  // The thread's IP is in file-backed code nothing writes (not JIT code).
  bool InStableCode(Thread* thread);
  void Resume(Thread* thread, int signal);
  // PT packets, stats and truth of one retired instruction; false: lost to an overflow.
  // The instruction starts at `time` and retires at `retired` (a syscall enters the
  // kernel then).
  bool RetireInsn(Thread* thread, const ExecutedInsn& insn, uint64_t time, uint64_t retired);
  // Before a plain step of a syscall: retires it at its entry into the kernel.
  void EnterSyscall(Thread* thread);
  void EndThread(Thread* thread, uint64_t next_ip, uint64_t time);
  // The thread's instructions lost to an overflow since its last traced one, as one
  // LOST record before what follows (where the trace resumes, or the thread's end).
  void WriteLost(Thread* thread, uint64_t time);
  void DetachAll();
  absl::Status PlantStartBreakpoint(int tid);
  void TryResolveTrigger();
  void ServeRequests();
  void ReportProgress(bool final);
  // Real time (--duration, progress, periodic work), never the trace's.
  static uint64_t Now();

  PtraceStepperOptions options_;
  StepperClock clock_;
  PtStreamSet* streams_;
  GroundTruthWriter* truth_;
  std::unordered_map<int, std::unique_ptr<Thread>> threads_;
  std::unordered_map<int, std::unique_ptr<AddressSpace>> spaces_;
  std::unordered_map<int, int> exit_statuses_;
  std::unordered_map<int, int> pending_new_;  // tid -> wait status seen before its parent's event
  std::atomic<bool> stop_requested_{false};
  std::atomic<const char*> stop_reason_{"sigint"};
  bool awaiting_start_symbol_ = false;  // PTRACE_SYSCALL until resolve_start succeeds
  uint64_t start_address_ = 0;
  uint64_t trigger_address_ = 0;
  PtraceStepperStats stats_;
  const char* end_reason_ = "exit";
  uint64_t start_ns_ = 0;
  uint64_t last_progress_ns_ = 0;
  uint64_t last_periodic_ns_ = 0;
  bool tracing_ = true;
  int initial_tid_ = -1;
  long start_word_ = 0;
  bool breakpoint_armed_ = false;
};

}  // namespace ptd
