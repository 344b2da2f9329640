#include "recorder/emulate/ptrace_stepper.h"
#include "common/monotonic_clock.h"

#include <elf.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "recorder/images/jit_capture.h"
#include "recorder/sideband/proc_maps.h"

namespace ptd {
namespace {

constexpr long kMmapFamily[] = {9 /*mmap*/, 10 /*mprotect*/, 11 /*munmap*/, 25 /*mremap*/};
// A system call's result while the kernel will restart it (include/linux/errno.h, not
// exported to user space).
constexpr long kErestartSys = 512;
constexpr long kErestartNoIntr = 513;
constexpr long kErestartNoHand = 514;
constexpr long kErestartRestartBlock = 516;

// True when `tid` has SIGTRAP pending (its own queue, /proc/TID/status SigPnd).
bool SigtrapPending(int tid) {
  std::ifstream status("/proc/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigPnd:", 0) == 0) return (std::strtoull(line.c_str() + 7, nullptr, 16) >> (SIGTRAP - 1)) & 1;
  }
  return false;
}

int ReadTgid(int tid) {
  std::ifstream status("/proc/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Tgid:", 0) == 0) return std::atoi(line.c_str() + 5);
  }
  return tid;
}

}  // namespace

struct PtraceStepper::ExecutableRange {
  uint64_t start = 0;
  uint64_t end = 0;
  bool stable = false;  // a file backs it and nothing may write it
};

struct PtraceStepper::AddressSpace {
  int pid = -1;
  image::InsnClassifier classifier;
  // Executable mappings (/proc/PID/maps, read again after the mmap family and for an
  // address outside them); code in the unstable ones (anonymous, or writable) is JIT
  // code, read and captured at every step.
  std::vector<ExecutableRange> executable;
  bool maps_known = false;
};

struct PtraceStepper::Thread {
  Thread(int pid_in, int tid_in) : pid(pid_in), tid(tid_in), frames(pid_in, tid_in) {}
  int pid;
  int tid;
  AddressSpace* space = nullptr;
  StackFrameTracker frames;
  bool have_insn = false;  // ip/rsp/insn describe the instruction about to execute
  uint64_t ip = 0;
  uint64_t rsp = 0;
  image::InsnInfo insn;
  bool injected = false;   // resumed with a signal: the next stop may be a handler entry
  int injected_signo = 0;
  bool running = false;    // resumed; a wait status is due
  bool awaiting_first_stop = false;
  bool ended = false;
  uint64_t lost = 0;  // instructions lost to an injected overflow, not yet in the truth
  // The syscall at `ip` was retired when its step began (EnterSyscall); its completion
  // (RIP moved) then only updates the frames. `syscall_traced`: it went into the trace.
  bool syscall_entered = false;
  bool syscall_traced = false;
  // Between its syscall-entry and syscall-exit stops: resumed with PTRACE_SYSCALL, so no
  // trap flag is set while it blocks in the kernel (see Resume).
  bool in_syscall = false;
  bool interrupted = false;  // PTRACE_INTERRUPT sent by DetachAll
};

PtraceStepper::PtraceStepper(const PtraceStepperOptions& options, PtStreamSet* streams,
                             GroundTruthWriter* truth)
    : options_(options), clock_(options.clock), streams_(streams), truth_(truth) {
  start_address_ = options_.start_address;
  awaiting_start_symbol_ = start_address_ == 0 && options_.resolve_start != nullptr;
  tracing_ = start_address_ == 0 && !awaiting_start_symbol_;
}

PtraceStepper::~PtraceStepper() = default;

uint64_t PtraceStepper::Now() { return MonotonicNs(); }

int PtraceStepper::exit_status(int pid) const {
  auto it = exit_statuses_.find(pid);
  return it == exit_statuses_.end() ? -1 : it->second;
}

PtraceStepper::AddressSpace* PtraceStepper::SpaceFor(int pid) {
  auto& space = spaces_[pid];
  if (space == nullptr) {
    space = std::make_unique<AddressSpace>();
    space->pid = pid;
    ++stats_.processes;
  }
  return space.get();
}

PtraceStepper::Thread* PtraceStepper::NewThread(int pid, int tid) {
  auto thread = std::make_unique<Thread>(pid, tid);
  thread->space = SpaceFor(pid);
  Thread* raw = thread.get();
  threads_[tid] = std::move(thread);
  clock_.AddThread(pid, tid);
  ++stats_.threads;
  if (options_.on_new_thread) options_.on_new_thread(tid);
  return raw;
}

absl::Status PtraceStepper::AddStoppedThread(int pid, int tid) {
  // TRACESYSGOOD: system calls are stepped with PTRACE_SYSCALL (Resume); their stops
  // read SIGTRAP|0x80.
  long flags = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | PTRACE_O_TRACESYSGOOD;
  if (options_.follow_forks) flags |= PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK;
  if (options_.kill_on_exit) flags |= PTRACE_O_EXITKILL;
  if (ptrace(PTRACE_SETOPTIONS, tid, nullptr, reinterpret_cast<void*>(flags)) != 0) {
    return ErrnoError("ptrace(PTRACE_SETOPTIONS)", absl::StrFormat("thread %d", tid), errno);
  }
  Thread* thread = NewThread(pid, tid);
  if (initial_tid_ < 0) {
    initial_tid_ = tid;
    if (awaiting_start_symbol_) {
      absl::StatusOr<uint64_t> address = options_.resolve_start();
      if (address.ok()) {
        start_address_ = *address;
        awaiting_start_symbol_ = false;
      } else if (address.status().code() != absl::StatusCode::kNotFound) {
        return address.status();
      }
    }
    if (start_address_ != 0) {
      if (absl::Status s = PlantStartBreakpoint(tid); !s.ok()) return s;
    }
    TryResolveTrigger();
  }
  if (absl::Status s = OnRegisters(thread, false, 0); !s.ok()) return s;
  Resume(thread, 0);
  return absl::OkStatus();
}

absl::Status PtraceStepper::PlantStartBreakpoint(int tid) {
  // int3 at the start address; the original word is restored when it is hit.
  errno = 0;
  const long word = ptrace(PTRACE_PEEKTEXT, tid, reinterpret_cast<void*>(start_address_), nullptr);
  if (errno != 0) {
    return ErrnoError("ptrace(PTRACE_PEEKTEXT) for --start-at",
                      absl::StrFormat("thread %d, address 0x%x", tid, start_address_), errno);
  }
  start_word_ = word;
  const long patched = (word & ~0xffl) | 0xcc;
  if (ptrace(PTRACE_POKETEXT, tid, reinterpret_cast<void*>(start_address_),
             reinterpret_cast<void*>(patched)) != 0) {
    return ErrnoError("ptrace(PTRACE_POKETEXT) for --start-at",
                      absl::StrFormat("thread %d, address 0x%x", tid, start_address_), errno);
  }
  breakpoint_armed_ = true;
  return absl::OkStatus();
}

void PtraceStepper::TryResolveTrigger() {
  if (trigger_address_ != 0 || !options_.resolve_trigger) return;
  absl::StatusOr<uint64_t> address = options_.resolve_trigger();
  if (address.ok()) trigger_address_ = *address;
}

void PtraceStepper::ServeRequests() {
  if (options_.requests_pending != nullptr && options_.requests_pending->load() &&
      options_.serve_requests) {
    options_.serve_requests();
  }
}

bool PtraceStepper::InStableCode(Thread* thread) {
  AddressSpace* space = thread->space;
  auto find = [&]() -> const ExecutableRange* {
    for (const ExecutableRange& r : space->executable) {
      if (thread->ip >= r.start && thread->ip < r.end) return &r;
    }
    return nullptr;
  };
  const ExecutableRange* range = space->maps_known ? find() : nullptr;
  if (range == nullptr) {
    // Not read yet, changed by the mmap family, or mapped while the program ran freely
    // (before --start-at): read again.
    space->maps_known = true;
    space->executable.clear();
    absl::StatusOr<std::vector<ProcMapping>> maps = ReadProcMaps(thread->pid);
    if (!maps.ok()) return true;  // cannot tell: as before JIT capture existed
    for (const ProcMapping& m : *maps) {
      if (m.executable()) space->executable.push_back({m.start, m.end, (m.prot & PROT_WRITE) == 0 && !m.anonymous()});
    }
    range = find();
  }
  return range == nullptr || range->stable;
}

void PtraceStepper::LoadInstruction(Thread* thread) {
  image::InsnClassifier& classifier = thread->space->classifier;
  const bool jit = options_.jit_capture != nullptr && !InStableCode(thread);
  if (const image::InsnInfo* cached = jit ? nullptr : classifier.Find(thread->ip)) {
    thread->insn = *cached;
    return;
  }
  uint8_t bytes[16] = {};
  iovec local{bytes, sizeof(bytes)};
  iovec remote{reinterpret_cast<void*>(thread->ip), sizeof(bytes)};
  ssize_t got = process_vm_readv(thread->tid, &local, 1, &remote, 1, 0);
  if (got <= 0) {
    // Execute-only or otherwise unreadable through the VM: ptrace can still peek.
    got = 0;
    for (size_t off = 0; off < sizeof(bytes); off += sizeof(long)) {
      errno = 0;
      const long word = ptrace(PTRACE_PEEKTEXT, thread->tid,
                               reinterpret_cast<void*>(thread->ip + off), nullptr);
      if (errno != 0) break;
      std::memcpy(bytes + off, &word, sizeof(word));
      got = static_cast<ssize_t>(off + sizeof(long));
    }
    if (got == 0) ++stats_.code_read_failures;
  }
  if (jit) {
    // Code that may be rewritten: classified afresh, its bytes captured for the decoder.
    thread->insn = classifier.Decode(thread->ip, absl::Span<const uint8_t>(bytes, static_cast<size_t>(got)));
    if (thread->insn.size > 0 && thread->insn.size <= got) {
      options_.jit_capture->Code(thread->pid, thread->tid, thread->ip, absl::MakeConstSpan(bytes, thread->insn.size),
                                 clock_.Now(thread->tid));
    }
    return;
  }
  thread->insn = classifier.Classify(thread->ip, absl::Span<const uint8_t>(bytes, static_cast<size_t>(got)));
}

absl::Status PtraceStepper::OnRegisters(Thread* thread, bool handler_entry, int signo) {
  user_regs_struct regs;
  if (ptrace(PTRACE_GETREGS, thread->tid, nullptr, &regs) != 0) {
    return ErrnoError("ptrace(PTRACE_GETREGS)", absl::StrFormat("thread %d", thread->tid), errno);
  }
  if (!thread->have_insn) {
    thread->ip = regs.rip;
    thread->rsp = regs.rsp;
    thread->have_insn = true;
    // Stopped (attached, interrupted) inside a system call the kernel restarts on resume:
    // that call runs again from its entry, so it is stepped as a system call (Resume).
    const long result = static_cast<long>(regs.rax);
    thread->in_syscall = static_cast<long>(regs.orig_rax) >= 0 &&
                         (result == -kErestartSys || result == -kErestartNoIntr || result == -kErestartNoHand ||
                          result == -kErestartRestartBlock);
    LoadInstruction(thread);
    return absl::OkStatus();
  }
  if (regs.rip == thread->ip) {
    // Not retired: a rep-string iteration, a faulting instruction, or a signal that
    // arrived before it ran.
    thread->rsp = regs.rsp;
    return absl::OkStatus();
  }
  if (handler_entry) {
    const uint64_t now = clock_.Now(thread->tid);
    const bool traced = streams_->AsyncDisable(thread->pid, thread->tid, thread->ip, now);
    // Lost to an overflow, the frame still counts for the depths of what follows.
    thread->frames.OnSignalHandler(thread->ip, regs.rip, regs.rsp, signo, now, traced ? truth_ : nullptr);
    ++stats_.signals_delivered;
    thread->syscall_entered = false;  // the handler runs first; the syscall comes again
  } else if (tracing_) {
    ExecutedInsn insn;
    insn.ip = thread->ip;
    insn.next_ip = regs.rip;
    insn.size = thread->insn.size;
    insn.kind = thread->insn.kind;
    bool traced = thread->syscall_traced;
    // A syscall retired at its entry (EnterSyscall); its frames move now, at its end.
    const uint64_t now = thread->syscall_entered ? clock_.Now(thread->tid) : clock_.Retire(thread->tid);
    if (!thread->syscall_entered) traced = RetireInsn(thread, insn, now, now + clock_.InstructionLength());
    thread->syscall_entered = false;
    // Lost to an overflow, the frames still follow RSP so later depths stay right.
    thread->frames.OnRetire(insn, thread->rsp, regs.rsp, now, traced ? truth_ : nullptr);
  }
  if (thread->insn.is_syscall) {
    for (long nr : kMmapFamily) {
      if (static_cast<long>(regs.orig_rax) == nr) {
        thread->space->classifier.Invalidate();
        thread->space->maps_known = false;
        ++stats_.cache_invalidations;
        if (nr == 9) TryResolveTrigger();  // a library may just have been mapped
      }
    }
  }
  thread->ip = regs.rip;
  thread->rsp = regs.rsp;
  LoadInstruction(thread);
  if (tracing_ && (options_.on_step || (trigger_address_ != 0 && regs.rip == trigger_address_ && options_.on_trigger))) {
    // The time of the thread's next instruction: a call's return is seen after its `ret`.
    const uint64_t next = clock_.Now(thread->tid);
    if (options_.on_step) options_.on_step(thread->pid, thread->tid, regs.rsp, next);
    if (trigger_address_ != 0 && regs.rip == trigger_address_ && options_.on_trigger) {
      options_.on_trigger(thread->pid, thread->tid, regs.rsp, next);
    }
  }
  return absl::OkStatus();
}

bool PtraceStepper::RetireInsn(Thread* thread, const ExecutedInsn& insn, uint64_t time, uint64_t retired) {
  const bool traced = streams_->Retire(thread->pid, thread->tid, insn, time, retired - time);
  if (insn.kind == BranchKind::kUnknown) ++stats_.undecodable;
  if (insn.kind == BranchKind::kFarTransfer) ++stats_.syscalls;
  if (!traced) {
    // Executed but not in the trace: the truth says how many where the trace resumes.
    ++stats_.lost_instructions;
    ++thread->lost;
    return false;
  }
  ++stats_.instructions;
  WriteLost(thread, time);
  if (truth_ != nullptr) {
    truth_->Instruction(thread->pid, thread->tid, insn.ip, time);
    if (insn.kind == BranchKind::kFarTransfer) truth_->Syscall(thread->pid, thread->tid, retired, insn.ip);
  }
  return true;
}

void PtraceStepper::EnterSyscall(Thread* thread) {
  if (!tracing_ || !thread->have_insn || !thread->insn.is_syscall || thread->syscall_entered) return;
  // A syscall retires as it enters the kernel, before the work it asks for, and its
  // TIP.PGD (user-only tracing) carries no IP: so it is written now, timed before the
  // kernel's records of that work, as on hardware. Written when the step is seen to end,
  // it came after them — and on a virtual CPU after what other threads ran meanwhile, so
  // the switch-in TIP.PGE before an execve postdated the new program's MMAP2s and the
  // decoder read the syscall from the new image.
  ExecutedInsn insn;
  insn.ip = thread->ip;
  insn.next_ip = thread->ip + thread->insn.size;  // unused by a far transfer's packets
  insn.size = thread->insn.size;
  insn.kind = thread->insn.kind;
  thread->syscall_entered = true;
  const uint64_t time = clock_.Retire(thread->tid);
  thread->syscall_traced = RetireInsn(thread, insn, time, clock_.EnterKernel(thread->tid, time));
}

void PtraceStepper::Resume(Thread* thread, int signal) {
  // A stop was asked for (e.g. by the trigger): leave the thread stopped for DetachAll,
  // so nothing runs untraced after the point the trace ends at.
  if (stop_requested_.load() && signal == 0) return;
  // A system call is not single-stepped but run from its entry stop to its exit stop with
  // PTRACE_SYSCALL: a thread blocked in the kernel then has no trap flag set. If the
  // recorder dies (even by SIGKILL) the kernel detaches its tracees without clearing the
  // trap flag (exit_ptrace skips the ptrace_disable that PTRACE_DETACH does), and a thread
  // left single-stepping gets SIGTRAP on its next instruction and dies of it.
  const bool syscall = tracing_ && signal == 0 && (thread->in_syscall || (thread->have_insn && thread->insn.is_syscall));
  const auto request = syscall                 ? PTRACE_SYSCALL
                       : tracing_              ? PTRACE_SINGLESTEP
                       : awaiting_start_symbol_ ? PTRACE_SYSCALL
                                                : PTRACE_CONT;
  thread->injected = signal != 0;
  thread->injected_signo = signal;
  // With a signal injected a handler may run before the instruction.
  if (tracing_ && signal == 0) EnterSyscall(thread);
  clock_.Resumed(thread->tid);
  if (ptrace(request, thread->tid, nullptr, reinterpret_cast<void*>(static_cast<long>(signal))) == 0) {
    thread->running = true;
    ++stats_.steps;
  }
  // ESRCH: the thread was killed meanwhile; its exit status arrives through waitpid.
}

void PtraceStepper::WriteLost(Thread* thread, uint64_t time) {
  if (thread->lost == 0) return;
  if (truth_ != nullptr) truth_->Lost(thread->pid, thread->tid, time, thread->lost);
  thread->lost = 0;
}

void PtraceStepper::EndThread(Thread* thread, uint64_t next_ip, uint64_t time) {
  if (thread->ended) return;
  thread->ended = true;
  streams_->ThreadEnded(thread->pid, thread->tid, next_ip, time);
  WriteLost(thread, time);
  if (truth_ != nullptr) truth_->End(thread->pid, thread->tid, time);
}

absl::Status PtraceStepper::HandleStop(Thread* thread, int status) {
  thread->running = false;
  if (WIFEXITED(status) || WIFSIGNALED(status)) {
    EndThread(thread, thread->ip, clock_.ThreadEnded(thread->tid));
    if (thread->tid == thread->pid) exit_statuses_[thread->pid] = status;
    threads_.erase(thread->tid);
    return absl::OkStatus();
  }
  if (!WIFSTOPPED(status)) return absl::OkStatus();
  const int sig = WSTOPSIG(status);
  const int event = status >> 16;
  if (thread->awaiting_first_stop) {
    // New threads and children start with a SIGSTOP (a PTRACE_EVENT_STOP when seized) that
    // is ours, not the program's.
    thread->awaiting_first_stop = false;
    if (absl::Status s = OnRegisters(thread, false, 0); !s.ok()) return s;
    Resume(thread, sig == SIGSTOP || event == PTRACE_EVENT_STOP ? 0 : sig);
    return absl::OkStatus();
  }
  if (sig == (SIGTRAP | 0x80) && tracing_) {
    // A stepped system call: its entry (go on to its exit), or its exit (it retired).
    // struct ptrace_syscall_info (linux/ptrace.h, which clashes with glibc's sys/ptrace.h):
    // its first byte is op, 1 at a syscall-entry stop (PTRACE_SYSCALL_INFO_ENTRY).
    constexpr uint8_t kSyscallInfoEntry = 1;
    uint8_t info[128] = {};
    if (ptrace(PTRACE_GET_SYSCALL_INFO, thread->tid, reinterpret_cast<void*>(sizeof(info)), info) > 0 &&
        info[0] == kSyscallInfoEntry) {
      thread->in_syscall = true;
      clock_.SyscallEntryStop(thread->tid);
    } else {
      thread->in_syscall = false;
      clock_.SyscallExitStop(thread->tid);
      if (absl::Status s = OnRegisters(thread, false, 0); !s.ok()) return s;
    }
    Resume(thread, 0);
    return absl::OkStatus();
  }
  if (sig == (SIGTRAP | 0x80)) {
    // A syscall stop while waiting for --start-at's library: after an mmap, look again.
    user_regs_struct regs;
    if (awaiting_start_symbol_ && ptrace(PTRACE_GETREGS, thread->tid, nullptr, &regs) == 0 &&
        regs.orig_rax == 9 /*mmap*/) {
      absl::StatusOr<uint64_t> address = options_.resolve_start();
      if (address.ok()) {
        start_address_ = *address;
        awaiting_start_symbol_ = false;
        if (absl::Status s = PlantStartBreakpoint(thread->tid); !s.ok()) return s;
      } else if (address.status().code() != absl::StatusCode::kNotFound) {
        return address.status();
      }
    }
    Resume(thread, 0);
    return absl::OkStatus();
  }
  if (sig == SIGTRAP && event != 0) {
    if (absl::Status s = OnRegisters(thread, false, 0); !s.ok()) return s;
    switch (event) {
      case PTRACE_EVENT_CLONE:
      case PTRACE_EVENT_FORK:
      case PTRACE_EVENT_VFORK: {
        unsigned long new_tid = 0;
        ptrace(PTRACE_GETEVENTMSG, thread->tid, nullptr, &new_tid);
        const int tid = static_cast<int>(new_tid);
        const int pid = event == PTRACE_EVENT_CLONE ? ReadTgid(tid) : tid;
        clock_.TaskCreated(thread->tid, pid, pid != thread->pid);
        Thread* child = NewThread(pid, tid);
        if (pid != thread->pid) {
          // A forked child continues on a copy of its parent's stack.
          child->frames.InheritFrames(thread->frames);
        }
        auto pending = pending_new_.find(tid);
        if (pending != pending_new_.end()) {
          pending_new_.erase(pending);
          if (absl::Status s = OnRegisters(child, false, 0); !s.ok()) return s;
          Resume(child, 0);
        } else {
          child->awaiting_first_stop = true;
        }
        break;
      }
      case PTRACE_EVENT_EXEC: {
        // A new program: nothing cached or stacked survives.
        spaces_.erase(thread->pid);
        if (options_.jit_capture != nullptr) options_.jit_capture->Exec(thread->pid);
        thread->space = SpaceFor(thread->pid);
        for (auto& [tid, other] : threads_) {
          if (other->pid == thread->pid) other->space = thread->space;
        }
        thread->frames.Reset();
        LoadInstruction(thread);
        break;
      }
      case PTRACE_EVENT_EXIT: {
        EndThread(thread, thread->ip, clock_.ThreadEnded(thread->tid));
        if (ptrace(PTRACE_CONT, thread->tid, nullptr, nullptr) == 0) thread->running = true;
        return absl::OkStatus();
      }
      default:
        break;
    }
    Resume(thread, 0);
    return absl::OkStatus();
  }
  if (sig == SIGTRAP) {
    if (!thread->injected) clock_.StepEnded(thread->tid);
    if (breakpoint_armed_) {
      user_regs_struct regs;
      if (ptrace(PTRACE_GETREGS, thread->tid, nullptr, &regs) == 0 &&
          regs.rip == start_address_ + 1) {
        ptrace(PTRACE_POKETEXT, thread->tid, reinterpret_cast<void*>(start_address_),
               reinterpret_cast<void*>(start_word_));
        regs.rip = start_address_;
        ptrace(PTRACE_SETREGS, thread->tid, nullptr, &regs);
        breakpoint_armed_ = false;
        tracing_ = true;
        stats_.start_reached = true;
        TryResolveTrigger();
        for (auto& [tid, other] : threads_) other->have_insn = false;
        if (absl::Status s = OnRegisters(thread, false, 0); !s.ok()) return s;
        Resume(thread, 0);
        return absl::OkStatus();
      }
    }
    bool handler_entry = false;
    if (thread->injected) {
      siginfo_t info;
      // The kernel reports a handler entry while single-stepping with si_code SIGTRAP
      // (ptrace_notify), an ordinary single step with TRAP_TRACE / TRAP_BRKPT.
      if (ptrace(PTRACE_GETSIGINFO, thread->tid, nullptr, &info) == 0) {
        handler_entry = info.si_code == SIGTRAP;
      }
    }
    if (absl::Status s = OnRegisters(thread, handler_entry, thread->injected_signo); !s.ok()) {
      return s;
    }
    Resume(thread, 0);
    return absl::OkStatus();
  }
  // Signal-delivery stop: deliver it; the next stop tells whether a handler runs.
  if (absl::Status s = OnRegisters(thread, false, 0); !s.ok()) return s;
  Resume(thread, sig);
  return absl::OkStatus();
}

void PtraceStepper::ReportProgress(bool final) {
  if (!options_.progress) return;
  const uint64_t now = Now();
  if (!final && now - last_progress_ns_ < 1000000000ull) return;
  last_progress_ns_ = now;
  const double seconds = static_cast<double>(now - start_ns_) / 1e9;
  std::fprintf(stderr, "\rptrace-direct: emulating: %llu steps, %.0f steps/s, %zu threads%s",
               static_cast<unsigned long long>(stats_.steps),
               seconds > 0 ? static_cast<double>(stats_.steps) / seconds : 0.0, threads_.size(),
               final ? "\n" : "   ");
}

void PtraceStepper::DetachAll() {
  // Stopped threads detach at once; running ones once their step has ended.
  while (!threads_.empty()) {
    bool any_running = false;
    for (auto it = threads_.begin(); it != threads_.end();) {
      Thread* thread = it->second.get();
      if (thread->running) {
        // Blocked in a system call its step may not end for as long as the call lasts:
        // PTRACE_INTERRUPT stops it now (the call is restarted once it is detached).
        if (!thread->interrupted) {
          thread->interrupted = true;
          ptrace(PTRACE_INTERRUPT, thread->tid, nullptr, nullptr);
        }
        any_running = true;
        ++it;
        continue;
      }
      if (breakpoint_armed_ && thread->pid == threads_.begin()->second->pid) {
        ptrace(PTRACE_POKETEXT, thread->tid, reinterpret_cast<void*>(start_address_),
               reinterpret_cast<void*>(start_word_));
        breakpoint_armed_ = false;
      }
      EndThread(thread, thread->ip, clock_.ThreadEnded(thread->tid));
      ptrace(PTRACE_DETACH, thread->tid, nullptr, nullptr);
      threads_.erase(it++);
    }
    if (!any_running) break;
    int status = 0;
    const pid_t tid = waitpid(-1, &status, __WALL);
    if (tid < 0 && errno == EINTR) continue;  // EmulationControl's wake-up signal
    if (tid < 0) break;
    auto it = threads_.find(tid);
    if (it == threads_.end()) continue;
    it->second->running = false;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      EndThread(it->second.get(), it->second->ip, clock_.ThreadEnded(tid));
      if (it->second->tid == it->second->pid) exit_statuses_[tid] = status;
      threads_.erase(it);
    } else if (WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP && SigtrapPending(tid)) {
      // Interrupted just as a step ended: the step's SIGTRAP is queued and would kill the
      // program once detached. Continued, the thread takes it first (a signal-delivery stop,
      // below), before running anything; it is detached there without it.
      if (ptrace(PTRACE_CONT, tid, nullptr, nullptr) == 0) it->second->running = true;
    } else if (WIFSTOPPED(status) && WSTOPSIG(status) != SIGTRAP && WSTOPSIG(status) != (SIGTRAP | 0x80) &&
               (status >> 16) == 0) {
      // A signal meant for the program (not a step's or a system call's stop): hand it over
      // on detach.
      EndThread(it->second.get(), it->second->ip, clock_.ThreadEnded(tid));
      ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(WSTOPSIG(status))));
      threads_.erase(it);
    }
  }
}

bool PtraceStepper::TracesProcess(int pid) const {
  for (const auto& [tid, thread] : threads_) {
    if (thread->pid == pid) return true;
  }
  return false;
}

absl::Status PtraceStepper::Run() {
  start_ns_ = Now();
  last_progress_ns_ = start_ns_;
  absl::Status result;
  last_periodic_ns_ = start_ns_;
  while (!threads_.empty()) {
    ServeRequests();
    if (options_.periodic &&
        static_cast<double>(Now() - last_periodic_ns_) / 1e9 >= options_.periodic_every_s) {
      last_periodic_ns_ = Now();
      options_.periodic();
    }
    if (stop_requested_.load()) {
      end_reason_ = stop_reason_.load();
      DetachAll();
      break;
    }
    if (options_.duration_s > 0 &&
        static_cast<double>(Now() - start_ns_) / 1e9 >= options_.duration_s) {
      end_reason_ = "duration";
      DetachAll();
      break;
    }
    int status = 0;
    const pid_t tid = waitpid(-1, &status, __WALL);
    if (tid < 0) {
      if (errno == EINTR) continue;
      if (errno == ECHILD) break;
      result = ErrnoError("waitpid", "traced threads", errno);
      end_reason_ = "error";
      DetachAll();
      break;
    }
    auto it = threads_.find(tid);
    if (it == threads_.end()) {
      // A new thread or child stopped before its parent's event reached us.
      if (WIFSTOPPED(status)) pending_new_[tid] = status;
      continue;
    }
    if (absl::Status s = HandleStop(it->second.get(), status); !s.ok()) {
      // The thread may be gone (killed between two calls): not fatal for the others.
      if (threads_.count(tid) != 0 && kill(tid, 0) == 0) {
        result = s;
        end_reason_ = "error";
        DetachAll();
        break;
      }
    }
    ReportProgress(false);
  }
  stats_.seconds = static_cast<double>(Now() - start_ns_) / 1e9;
  ReportProgress(true);
  return result;
}

}  // namespace ptd
