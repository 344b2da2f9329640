#include "recorder/valgrind/vgpt_converter.h"
#include "common/monotonic_clock.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "image/jitdump.h"
#include "recorder/valgrind/tool/vgpt_stream.h"
#include "sideband/record_builder.h"

namespace ptd {
namespace {

constexpr uint32_t kNoBlock = 0;
// Virtual time a system call (or a trap into the kernel) takes. Records of what it did
// (an mmap's mapping, an exec's new program) come after it, so the instructions before
// the call are decoded with the image as it was even when the decoder's time runs a few
// packets ahead of its position (libipt reads ahead; tens of instructions).
constexpr uint64_t kSyscallNs = 1000;


BranchKind LastInsnKind(uint32_t kind) {
  switch (kind) {
    case VGPT_KIND_COND: return BranchKind::kCondJump;
    case VGPT_KIND_JUMP: return BranchKind::kDirectJump;
    case VGPT_KIND_IJUMP: return BranchKind::kIndirectJump;
    case VGPT_KIND_CALL: return BranchKind::kDirectCall;
    case VGPT_KIND_ICALL: return BranchKind::kIndirectCall;
    case VGPT_KIND_RET: return BranchKind::kReturn;
    // int3 and other traps enter the kernel like a system call.
    case VGPT_KIND_SYSCALL:
    case VGPT_KIND_TRAP: return BranchKind::kFarTransfer;
    default: return BranchKind::kNone;  // fall-through, rep string instructions
  }
}

// System calls inside which Valgrind itself works on the memory they map (reading a
// library's symbols and unwind tables).
bool MapsMemory(uint32_t number) {
  return number == SYS_mmap || number == SYS_munmap || number == SYS_mprotect || number == SYS_mremap ||
         number == SYS_brk || number == SYS_shmat;
}

// Reads a record's payload: u32, u64 (low word first) and strings padded to a word.
class Payload {
 public:
  explicit Payload(absl::Span<const uint32_t> words) : words_(words) {}
  bool ok() const { return ok_; }
  uint32_t U32() {
    if (pos_ >= words_.size()) return Fail();
    return words_[pos_++];
  }
  uint64_t U64() {
    const uint64_t lo = U32();
    const uint64_t hi = U32();
    return lo | (hi << 32);
  }
  std::string String() {
    const char* begin = reinterpret_cast<const char*>(words_.data() + pos_);
    const size_t max = (words_.size() - std::min(pos_, words_.size())) * 4;
    const size_t len = strnlen(begin, max);
    if (len == max) return Fail(), std::string();
    pos_ += (len + 1 + 3) / 4;
    return std::string(begin, len);
  }
  absl::Span<const uint8_t> Bytes(size_t n) {
    const size_t words = (n + 3) / 4;
    if (pos_ + words > words_.size()) return Fail(), absl::Span<const uint8_t>();
    absl::Span<const uint8_t> out(reinterpret_cast<const uint8_t*>(words_.data() + pos_), n);
    pos_ += words;
    return out;
  }

 private:
  uint32_t Fail() {
    ok_ = false;
    return 0;
  }
  absl::Span<const uint32_t> words_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Linux's dev_t encoding (new_encode_dev), as Valgrind reports it.
uint32_t DevMajor(uint64_t dev) { return static_cast<uint32_t>(((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfffull)); }
uint32_t DevMinor(uint64_t dev) { return static_cast<uint32_t>((dev & 0xff) | ((dev >> 12) & ~0xffull)); }

std::string CommOf(const std::string& exe) {
  const size_t slash = exe.rfind('/');
  std::string base = slash == std::string::npos ? exe : exe.substr(slash + 1);
  if (base.size() > 15) base.resize(15);  // TASK_COMM_LEN - 1, as the kernel cuts it
  return base;
}

}  // namespace

struct VgptConverter::Block {
  uint64_t start = 0, end = 0, last_ip = 0, target = 0;
  uint64_t trigger = 0;  // a --trigger address inside the block (0: none)
  uint32_t n = 0;        // instructions
  uint32_t lengths_at = 0;  // their lengths: Instance::lengths[lengths_at .. + n]
  uint8_t kind = VGPT_KIND_NONE;
  bool described = false;
  bool hidden = false;  // Valgrind's own code: not traced
  bool jit = false;     // runs from memory no file backs: captured (VGPT_CODE)
};

struct VgptConverter::Process {
  int pid = 0;
  int ppid = 0;
  uint64_t clock = 0;
  // Instructions executed (Valgrind's own code too), the last wall stamp (the tool's
  // VGPT_TIME, a system call's return) and the count then.
  uint64_t instructions = 0;
  uint64_t stamp_ns = 0;
  uint64_t stamp_instructions = 0;
  // A fork is named by the instance (file number) of the program that made it and its
  // seq in that program: each exec'd program counts its forks from 1 again.
  using ForkKey = std::pair<uint32_t, uint32_t>;  // instance, fork_seq
  std::map<ForkKey, uint64_t> fork_times;         // -> time of the fork
  std::map<ForkKey, int> forking_tid;
  std::set<uint32_t> closed_instances;  // instances read to their end: no more forks come
  std::vector<uint64_t> triggers;  // sorted
  bool alive = true;
  bool exec_pending = false;  // the last instance ended with an exec attempt
};

struct VgptConverter::Thread {
  int tid = 0;
  int pid = 0;
  Instance* pending_in = nullptr;
  uint32_t pending_id = kNoBlock;
  uint64_t pending_time = 0;
  uint64_t last_ip = 0;  // where the thread was last known to be (for a stream's end)
  int64_t depth = 0;     // calls and signal deliveries minus returns (the stack key)
  // In a system call since the process clock read syscall_clock: its SYSCALL_TIME record
  // says how long it took.
  bool in_syscall = false;
  uint64_t syscall_clock = 0;
  uint64_t syscall_instructions = 0;  // the process's count at the call
  uint64_t StackKey() const { return kStackKeyBase - 8 * static_cast<uint64_t>(depth); }
};

struct VgptConverter::Instance {
  std::string name;
  bool hello = false;
  bool closed = false;
  bool exited = false;
  bool last_was_exec = false;
  // The last record: an exec of a program that runs untraced (VGPT_EXEC_UNTRACED).
  std::optional<UntracedExec> untraced_exec;
  int pid = 0;
  uint32_t number = 0;  // the file's <n> (<pid>-<n>.vgpt), from the hello record
  Process* process = nullptr;
  Thread* current = nullptr;
  std::vector<Block> blocks;
  std::vector<uint8_t> lengths;
};

VgptConverter::VgptConverter(const VgptConverterOptions& options, PtStreamSet* streams,
                             const TraceDirWriter* dir)
    : options_(options), streams_(streams), dir_(dir) {}

VgptConverter::~VgptConverter() {
  for (const auto& [pid, fd] : jitdump_fds_) close(fd);
}

int VgptConverter::OpenInstance(const std::string& name) {
  for (const auto& [pid, fd] : jitdump_fds_) close(fd);
  auto in = std::make_unique<Instance>();
  in->name = name;
  in->blocks.resize(1);
  instances_.push_back(std::move(in));
  ++stats_.processes;
  return static_cast<int>(instances_.size()) - 1;
}

bool VgptConverter::Exited(int instance) const {
  // After an untraced exec nothing more comes, unless the exec failed.
  return instances_[instance]->exited || instances_[instance]->untraced_exec.has_value();
}
int VgptConverter::PidOf(int instance) const { return instances_[instance]->pid; }

// On the virtual clock one ns an instruction. The wall clock stands between the tool's
// stamps (one at least every 51,200 instructions, and at every system call): no timing
// packet comes between two, so the decoder spreads the time between them over the
// instructions between them (CPU work lasts about as long as it ran under the emulator),
// instead of 1 ns an instruction with the rest of the time landing on the block after
// the next stamp.
uint64_t VgptConverter::Work(Process& process, uint32_t instructions) {
  process.instructions += instructions;
  return options_.wall_clock ? 0 : instructions;
}

// The rate of CPU work between stamps, for `info` (how much the emulator slows it).
void VgptConverter::Stamp(Process& process, uint64_t now, uint64_t instructions) {
  if (process.stamp_ns != 0 && now > process.stamp_ns && instructions > process.stamp_instructions) {
    stats_.work_ns += now - process.stamp_ns;
    stats_.work_instructions += instructions - process.stamp_instructions;
  }
  process.stamp_ns = now;
  process.stamp_instructions = instructions;
}

uint64_t VgptConverter::Tick(Process& process) {
  const uint64_t t = process.clock++;
  newest_time_ = std::max(newest_time_, process.clock);
  return t;
}

void VgptConverter::AddRecord(PerfRecordBody body, int pid, int tid, uint64_t time) {
  PerfRecord record;
  record.body = std::move(body);
  record.type = RecordTypeOf(record.body);
  record.misc = PERF_RECORD_MISC_USER;
  record.sample_id.pid = static_cast<uint32_t>(pid);
  record.sample_id.tid = static_cast<uint32_t>(tid);
  record.sample_id.time = time;
  record.sample_id.cpu = 0;
  records_.push_back(TimedRecord{time, records_.size(), std::move(record)});
}

VgptConverter::Thread& VgptConverter::ThreadOf(Instance& in, int tid) {
  auto [it, inserted] = threads_.try_emplace(tid);
  if (inserted) {
    it->second = std::make_unique<Thread>();
    it->second->tid = tid;
    it->second->pid = in.pid;
    ++stats_.threads;
    if (tid != in.pid) {
      // A new thread of the process (the kernel's FORK record for a clone).
      ForkRecord fork;
      fork.pid = fork.ppid = static_cast<uint32_t>(in.pid);
      fork.tid = static_cast<uint32_t>(tid);
      fork.ptid = static_cast<uint32_t>(in.current != nullptr ? in.current->tid : in.pid);
      fork.time = Tick(*in.process);
      AddRecord(fork, in.pid, tid, fork.time);
    }
  }
  return *it->second;
}

size_t VgptConverter::Feed(int instance, absl::Span<const uint32_t> words, bool* waiting) {
  *waiting = false;
  Instance& in = *instances_[instance];
  size_t i = 0;
  const size_t size = words.size();
  if (stopped_) return 0;
  while (i < size) {
    const uint32_t w = words[i];
    if (w < VGPT_TAG_BASE) {
      if (in.hello) {
        RunBlock(in, w);
        if (stopped_) return i + 1;
      } else {
        ++stats_.bad_records;
      }
      ++i;
      continue;
    }
    if (i + 2 > size) break;
    const uint32_t n = words[i + 1];
    if (n > (64u << 20)) {
      // A length no tool record has: the stream is damaged; skip the rest of it.
      ++stats_.bad_records;
      notes_.push_back(absl::StrFormat("%s: damaged record at word %u; the rest of it is skipped",
                                       in.name, i));
      return size;
    }
    if (i + 2 + n > size) break;
    FeedControl(in, w & 0xff, words.subspan(i + 2, n), waiting);
    if (*waiting) break;
    i += 2 + n;
  }
  return i;
}

void VgptConverter::RunBlock(Instance& in, uint32_t id) {
  if (id >= in.blocks.size() || !in.blocks[id].described) {
    ++stats_.unknown_blocks;
    return;
  }
  if (in.current == nullptr) in.current = &ThreadOf(in, in.pid);
  Thread& thread = *in.current;
  const Block& block = in.blocks[id];
  ++stats_.blocks;
  Process& process = *in.process;
  if (block.hidden) {
    // Valgrind's own code: the branch into it leaves the traced region; the next block of
    // the program's code re-enters it.
    if (thread.pending_id != kNoBlock) LeaveForValgrindsCode(in, thread, block.start);
    process.clock += Work(process, block.n);
    ++stats_.hidden_blocks;
    return;
  }
  if (thread.pending_id != kNoBlock) Resolve(in, thread, block.start);
  thread.pending_in = &in;
  thread.pending_id = id;
  thread.pending_time = process.clock;
  if (block.jit) jit_capture_.Ran(in.pid, block.start, process.clock);
  process.clock += Work(process, block.n);
  if (block.kind == VGPT_KIND_SYSCALL) {
    // Its SYSCALL_TIME record (after what the call did) makes it as long as it took.
    thread.in_syscall = true;
    thread.syscall_clock = process.clock;
    thread.syscall_instructions = process.instructions;
  }
  // At least this long: the records of what a call did (an mmap's mapping, an exec's new
  // image) come after it by more than the decoder's read-ahead.
  if (block.kind == VGPT_KIND_SYSCALL || block.kind == VGPT_KIND_TRAP) process.clock += kSyscallNs;
  newest_time_ = std::max(newest_time_, process.clock);
  if (block.trigger != 0 && options_.on_trigger) {
    options_.on_trigger(in.pid, thread.tid, block.trigger, thread.StackKey(), thread.pending_time);
  }
}

void VgptConverter::Resolve(Instance& in, Thread& thread, uint64_t next_ip, bool leaving) {
  (void)in;
  const Block& p = thread.pending_in->blocks[thread.pending_id];
  thread.pending_id = kNoBlock;
  const uint64_t straight = p.n - 1;
  if (p.kind == VGPT_KIND_REP && next_ip == p.last_ip) {
    // Another iteration: a rep instruction retires once, when the block that ends it
    // (the one starting at it) leaves.
    if (straight > 0) {
      streams_->RetireStraight(thread.pid, thread.tid, p.start, straight, thread.pending_time);
      stats_.instructions += straight;
    }
    thread.last_ip = p.last_ip;
    return;
  }
  // A block VEX left by a side exit in its middle (an emulation warning after fldcw, a
  // failed compare-and-swap retried): what precedes the exit's target ran, the rest did
  // not. A target the last instruction itself can have is its branch, not such an exit.
  const bool branch_target = p.kind == VGPT_KIND_IJUMP || p.kind == VGPT_KIND_ICALL || p.kind == VGPT_KIND_RET ||
                             p.kind == VGPT_KIND_SYSCALL || p.kind == VGPT_KIND_TRAP || next_ip == p.end ||
                             ((p.kind == VGPT_KIND_COND || p.kind == VGPT_KIND_JUMP || p.kind == VGPT_KIND_CALL) &&
                              next_ip == p.target);
  if (!branch_target && next_ip >= p.start && next_ip < p.end) {
    const uint64_t ran = InstructionsBefore(*thread.pending_in, p, next_ip);
    if (ran > 0) streams_->RetireStraight(thread.pid, thread.tid, p.start, ran, thread.pending_time);
    stats_.instructions += ran;
    ++stats_.side_exits;
    thread.last_ip = next_ip;
    return;
  }
  ExecutedInsn last;
  last.ip = p.last_ip;
  last.size = static_cast<uint8_t>(p.end - p.last_ip);
  last.next_ip = next_ip;
  last.kind = LastInsnKind(p.kind);
  // Out of the traced region: unless the block left for the kernel already.
  leaving = leaving && p.kind != VGPT_KIND_SYSCALL && p.kind != VGPT_KIND_TRAP;
  streams_->RetireBlock(thread.pid, thread.tid, p.start, straight, last, thread.pending_time, leaving);
  stats_.instructions += p.n;
  thread.last_ip = next_ip;
  if (last.kind == BranchKind::kDirectCall || last.kind == BranchKind::kIndirectCall) {
    ++thread.depth;
  } else if (last.kind == BranchKind::kReturn) {
    --thread.depth;
    if (options_.on_return) options_.on_return(thread.pid, thread.tid, thread.StackKey(), thread.pending_time + straight);
  }
}

void VgptConverter::LeaveForValgrindsCode(Instance& in, Thread& thread, uint64_t target) {
  const Block& p = thread.pending_in->blocks[thread.pending_id];
  if (p.kind == VGPT_KIND_SYSCALL || p.kind == VGPT_KIND_TRAP || p.kind == VGPT_KIND_NONE ||
      p.kind == VGPT_KIND_REP) {
    Resolve(in, thread, target, /*leaving=*/true);
    return;
  }
  // A branch into Valgrind's code (the loader calling its preload library's constructors
  // and destructors; a function they called returning to them) is one the program does
  // not make without Valgrind: the trace leaves before it and comes back where the
  // program's code runs again, so no frame of Valgrind's code appears, only the gap.
  thread.pending_id = kNoBlock;
  const uint64_t before_call = p.n - 1;
  if (before_call > 0) streams_->RetireStraight(thread.pid, thread.tid, p.start, before_call, thread.pending_time);
  stats_.instructions += before_call;
  thread.last_ip = p.last_ip;
  streams_->AsyncDisable(thread.pid, thread.tid, p.last_ip, Tick(*in.process));
}

uint64_t VgptConverter::InstructionsBefore(const Instance& in, const Block& block, uint64_t ip) {
  uint64_t n = 0;
  uint64_t at = block.start;
  const uint8_t* lengths = in.lengths.data() + block.lengths_at;
  while (n < block.n && at < ip) at += lengths[n++];
  return at == ip ? n : 0;
}

void VgptConverter::Interrupt(Instance& in, Thread& thread, uint64_t ip) {
  Process& process = *in.process;
  if (thread.pending_id != kNoBlock) {
    const Block& p = thread.pending_in->blocks[thread.pending_id];
    // Could the block have left towards `ip`? Then it ran to its end.
    const bool exit_to_ip = p.kind == VGPT_KIND_IJUMP || p.kind == VGPT_KIND_ICALL ||
                            p.kind == VGPT_KIND_RET || p.kind == VGPT_KIND_SYSCALL ||
                            (p.kind == VGPT_KIND_TRAP && ip == p.end) || ip == p.end ||
                            (p.target == ip && p.kind != VGPT_KIND_NONE);
    const bool inside = ip >= p.start && ip < p.end;
    if (inside && !(exit_to_ip && ip == p.start)) {
      // Cut at `ip`: a fault (or a rep interrupted between iterations): what precedes
      // the instruction at `ip` retired, the rest did not run.
      const uint64_t ran = InstructionsBefore(*thread.pending_in, p, ip);
      thread.pending_id = kNoBlock;
      if (ran > 0 || ip == p.start) {
        if (ran > 0) streams_->RetireStraight(thread.pid, thread.tid, p.start, ran, thread.pending_time);
        stats_.instructions += ran;
        if (!(p.kind == VGPT_KIND_REP && ip == p.last_ip)) ++stats_.faults;
      } else {
        ++stats_.bad_records;  // not an instruction boundary of the block
      }
    } else {
      Resolve(in, thread, ip);
    }
  }
  thread.last_ip = ip;
  streams_->AsyncDisable(thread.pid, thread.tid, ip, Tick(process));
}

void VgptConverter::EndThread(Instance& in, Thread& thread) {
  Process& process = *in.process;
  if (thread.pending_id != kNoBlock) {
    const Block& p = thread.pending_in->blocks[thread.pending_id];
    if (p.kind == VGPT_KIND_SYSCALL) {
      Resolve(in, thread, p.end);  // exit / exit_group
    } else {
      // Killed while running: the pending block's fate is unknown; the stream ends
      // where it began.
      thread.last_ip = p.start;
      thread.pending_id = kNoBlock;
    }
  }
  const uint64_t t = Tick(process);
  streams_->ThreadEnded(thread.pid, thread.tid, thread.last_ip, t);
  ExitRecord exit;
  exit.pid = static_cast<uint32_t>(thread.pid);
  exit.ppid = static_cast<uint32_t>(thread.tid == thread.pid ? process.ppid : thread.pid);
  exit.tid = static_cast<uint32_t>(thread.tid);
  exit.ptid = exit.ppid;
  exit.time = t;
  AddRecord(exit, thread.pid, thread.tid, t);
  if (in.current == &thread) in.current = nullptr;
  threads_.erase(thread.tid);
}

size_t VgptConverter::FeedControl(Instance& in, uint32_t kind, absl::Span<const uint32_t> words,
                                  bool* waiting) {
  Payload p(words);
  if (kind != VGPT_HELLO && !in.hello) {
    ++stats_.bad_records;
    return 0;
  }
  // A time stamp follows every flush, the one after an exec attempt too.
  if (kind != VGPT_TIME) {
    in.last_was_exec = false;
    in.untraced_exec.reset();  // a record after it: the exec failed
  }
  switch (kind) {
    case VGPT_HELLO: {
      const uint32_t version = p.U32();
      const int pid = static_cast<int>(p.U32());
      const int ppid = static_cast<int>(p.U32());
      const uint32_t flags = p.U32();
      const uint32_t fork_seq = p.U32();
      const uint32_t number = p.U32();
      const uint32_t parent_number = p.U32();
      const std::string exe = p.String();
      if (!p.ok() || version != VGPT_VERSION || in.hello) {
        ++stats_.bad_records;
        notes_.push_back(absl::StrCat(in.name, ": unusable first record (tool version ", version,
                                      ", want ", VGPT_VERSION, ")"));
        return 0;
      }
      auto found = processes_.find(pid);
      Process* process = nullptr;
      uint64_t start = options_.wall_clock ? MonotonicNs() : options_.clock_start;
      if (found != processes_.end() && found->second->alive) {
        // The same process after an exec: its clock goes on; the old program's other
        // threads are gone; its exec'ing thread (now the main thread) continues.
        process = found->second.get();
        ++stats_.execs;
        jit_capture_.Exec(pid);
        std::vector<Thread*> gone;
        for (auto& [tid, thread] : threads_) {
          if (thread->pid != pid) continue;
          if (tid != pid) gone.push_back(thread.get());
        }
        in.pid = pid;
        in.number = number;
        in.process = process;
        for (Thread* t : gone) EndThread(in, *t);
        if (auto main = threads_.find(pid); main != threads_.end() && main->second->pending_id != kNoBlock) {
          Resolve(in, *main->second, 0);  // the execve: a far transfer, its target unknown
        }
      } else {
        if (flags & VGPT_HELLO_FORK_CHILD) {
          // Wait for the parent's stream to reach the fork (its FORKING record is written
          // before the child exists), unless the parent's program that forked has been
          // read to its end without it, or nothing else can move (StopWaiting).
          auto parent = processes_.find(ppid);
          const bool parent_done = parent != processes_.end() &&
                                   parent->second->closed_instances.count(parent_number) > 0;
          std::optional<uint64_t> fork_time;
          if (parent != processes_.end()) {
            auto at = parent->second->fork_times.find({parent_number, fork_seq});
            if (at != parent->second->fork_times.end()) fork_time = at->second;
          }
          if (fork_time) {
            start = *fork_time;
          } else if (!parent_done && !stop_waiting_) {
            *waiting = true;
            return 0;
          } else if (parent != processes_.end()) {
            start = parent->second->clock;
          }
        }
        auto owned = std::make_unique<Process>();
        process = owned.get();
        process->pid = pid;
        process->ppid = ppid;
        process->clock = std::max(start, newest_time_ == 0 ? start : uint64_t{0});
        processes_[pid] = std::move(owned);
        in.pid = pid;
        in.number = number;
        in.process = process;
        if (flags & VGPT_HELLO_FORK_CHILD) {
          ++stats_.forks;
          ForkRecord fork;
          fork.pid = fork.tid = static_cast<uint32_t>(pid);
          fork.ppid = static_cast<uint32_t>(ppid);
          auto parent = processes_.find(ppid);
          int ptid = ppid;
          if (parent != processes_.end()) {
            auto t = parent->second->forking_tid.find({parent_number, fork_seq});
            if (t != parent->second->forking_tid.end()) ptid = t->second;
          }
          fork.ptid = static_cast<uint32_t>(ptid);
          fork.time = Tick(*process);
          AddRecord(fork, pid, pid, fork.time);
          in.hello = true;
          return 0;
        }
      }
      in.hello = true;
      CommRecord comm;
      comm.pid = comm.tid = static_cast<uint32_t>(pid);
      comm.comm = CommOf(exe);
      comm.exec = true;
      AddRecord(comm, pid, pid, Tick(*process));
      return 0;
    }
    case VGPT_BLOCK: {
      const uint32_t id = p.U32();
      Block b;
      b.start = p.U64();
      b.end = p.U64();
      b.last_ip = p.U64();
      b.target = p.U64();
      b.kind = static_cast<uint8_t>(p.U32());
      b.n = p.U32();
      b.hidden = (p.U32() & VGPT_BLOCK_HIDDEN) != 0;
      absl::Span<const uint8_t> lengths = p.Bytes(b.n);
      if (!p.ok() || id == kNoBlock || id >= VGPT_TAG_BASE || b.n == 0 || b.end <= b.start ||
          id > in.blocks.size() + (1u << 20)) {
        ++stats_.bad_records;
        return 0;
      }
      b.lengths_at = static_cast<uint32_t>(in.lengths.size());
      in.lengths.insert(in.lengths.end(), lengths.begin(), lengths.end());
      const std::vector<uint64_t>& triggers = in.process->triggers;
      auto t = std::lower_bound(triggers.begin(), triggers.end(), b.start);
      if (t != triggers.end() && *t < b.end) b.trigger = *t;
      b.described = true;
      if (id >= in.blocks.size()) in.blocks.resize(static_cast<size_t>(id) + 1);
      in.blocks[id] = b;
      return 0;
    }
    case VGPT_CODE: {
      const uint32_t id = p.U32();
      const uint64_t start = p.U64();
      const uint32_t size = p.U32();
      absl::Span<const uint8_t> bytes = p.Bytes(size);
      if (!p.ok() || id >= in.blocks.size() || !in.blocks[id].described || in.blocks[id].start != start ||
          size != in.blocks[id].end - start) {
        ++stats_.bad_records;
        return 0;
      }
      in.blocks[id].jit = true;
      jit_capture_.Code(in.pid, in.current != nullptr ? in.current->tid : in.pid, start, bytes, in.process->clock);
      return 0;
    }
    case VGPT_SWITCH: {
      const int now = static_cast<int>(p.U32());
      const int out = static_cast<int>(p.U32());
      const uint64_t resume = p.U64();
      if (!p.ok() || now <= 0) {
        ++stats_.bad_records;
        return 0;
      }
      if (out > 0) {
        auto it = threads_.find(out);
        if (it != threads_.end()) {
          Thread& old = *it->second;
          // Runnable (its time slice ended) unless it was in a system call (blocked).
          const bool in_syscall = old.pending_id != kNoBlock &&
                                  old.pending_in->blocks[old.pending_id].kind == VGPT_KIND_SYSCALL;
          Interrupt(in, old, resume);
          SwitchRecord sw;
          sw.out = true;
          sw.preempt = !in_syscall;
          AddRecord(sw, in.pid, out, Tick(*in.process));
        }
      }
      in.current = &ThreadOf(in, now);
      AddRecord(SwitchRecord{}, in.pid, now, Tick(*in.process));
      return 0;
    }
    case VGPT_SYSCALL_TIME: {
      const int tid = static_cast<int>(p.U32());
      const uint32_t number = p.U32();
      const uint64_t entry = p.U64();
      const uint64_t exit = p.U64();
      const uint64_t cpu = p.U64();
      if (!p.ok() || exit < entry) {
        ++stats_.bad_records;
        return 0;
      }
      auto it = threads_.find(tid);
      // Not in a call here: a forked child's copy of its parent's fork().
      if (it == threads_.end() || !it->second->in_syscall) return 0;
      Thread& thread = *it->second;
      thread.in_syscall = false;
      Process& process = *in.process;
      // CPU work ran up to the call, none in it.
      Stamp(process, entry, thread.syscall_instructions);
      process.stamp_ns = exit;
      if (options_.wall_clock) {
        // The call's instruction retires when it was made, the next one when it returned.
        if (thread.pending_id != kNoBlock) {
          const Block& block = thread.pending_in->blocks[thread.pending_id];
          if (block.kind == VGPT_KIND_SYSCALL && entry > block.n) {
            thread.pending_time = std::max(thread.pending_time, entry - block.n);
          }
        }
        process.clock = std::max(process.clock, exit);
      } else {
        // The virtual clock: the call lasts as long as it took. Valgrind reads the symbols
        // of the code a call maps inside the call: there only the time off the CPU counts.
        uint64_t took = exit - entry;
        if (MapsMemory(number)) took -= std::min(took, cpu);
        process.clock = std::max(process.clock, thread.syscall_clock + took);
      }
      newest_time_ = std::max(newest_time_, process.clock);
      return 0;
    }
    case VGPT_TIME: {
      const uint64_t now = p.U64();
      if (!p.ok()) {
        ++stats_.bad_records;
        return 0;
      }
      if (in.process == nullptr) return 0;
      Stamp(*in.process, now, in.process->instructions);
      if (options_.wall_clock) in.process->clock = std::max(in.process->clock, now);
      return 0;
    }
    case VGPT_THREAD_EXIT: {
      const int tid = static_cast<int>(p.U32());
      auto it = threads_.find(tid);
      if (!p.ok() || it == threads_.end()) return 0;
      EndThread(in, *it->second);
      return 0;
    }
    case VGPT_SIGNAL: {
      const int tid = static_cast<int>(p.U32());
      p.U32();  // signo
      const uint64_t ip = p.U64();
      if (!p.ok()) {
        ++stats_.bad_records;
        return 0;
      }
      ++stats_.signals;
      Thread& interrupted = ThreadOf(in, tid);
      Interrupt(in, interrupted, ip);
      ++interrupted.depth;  // the handler returns (to the restorer) as from a call
      return 0;
    }
    case VGPT_MAP: {
      Mmap2Record map;
      map.pid = map.tid = static_cast<uint32_t>(in.pid);
      map.addr = p.U64();
      map.len = p.U64();
      map.pgoff = p.U64();
      const uint32_t prot = p.U32();
      p.U32();  // flags
      const uint64_t dev = p.U64();
      map.ino = p.U64();
      map.filename = p.String();
      if (!p.ok()) {
        ++stats_.bad_records;
        return 0;
      }
      if ((prot & 4) == 0) return 0;  // as the kernel: executable mappings only
      if (image::IsJitDumpName(map.filename) && !jitdump_fds_.count(in.pid)) {
        // A runtime announcing its jitdump: held open, so that it can be copied when
        // recording ends even if the runtime deletes it.
        const int fd = open(map.filename.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0) jitdump_fds_[in.pid] = fd;
      }
      map.maj = DevMajor(dev);
      map.min = DevMinor(dev);
      map.prot = PROT_EXEC | ((prot & 1) ? PROT_READ : 0) | ((prot & 2) ? PROT_WRITE : 0);
      map.flags = MAP_PRIVATE;
      const bool file_backed = !map.filename.empty() && map.filename[0] == '/';
      if (map.filename.empty()) map.filename = "//anon";
      if (options_.on_map && file_backed) options_.on_map(map);
      if (options_.trigger_addresses && file_backed) {
        std::vector<uint64_t>& triggers = in.process->triggers;
        for (uint64_t a : options_.trigger_addresses(map)) triggers.push_back(a);
        std::sort(triggers.begin(), triggers.end());
      }
      AddRecord(map, in.pid, in.pid, Tick(*in.process));
      return 0;
    }
    case VGPT_UNMAP:
      return 0;  // the kernel reports none either: the next mapping there replaces it
    case VGPT_FORKING: {
      const uint32_t seq = p.U32();
      ++stats_.forks_begun;
      in.process->fork_times[{in.number, seq}] = Tick(*in.process);
      in.process->forking_tid[{in.number, seq}] = in.current != nullptr ? in.current->tid : in.pid;
      return 0;
    }
    case VGPT_FORKED:
      return 0;
    case VGPT_NOTE:
      return 0;  // an untraced exec failed: cleared above, as by any record after it
    case VGPT_EXEC:
      in.last_was_exec = true;
      return 0;
    case VGPT_EXEC_UNTRACED: {
      UntracedExec exec;
      exec.pid = in.pid;
      const uint32_t reason = p.U32();
      exec.program = p.String();
      if (!p.ok()) {
        ++stats_.bad_records;
        return 0;
      }
      exec.reason = reason == VGPT_UNTRACED_PRIVILEGED
                        ? "setuid, setgid or with file capabilities: Valgrind cannot run it with its privileges; "
                          "--emulate=ptrace can, as root"
                        : absl::StrCat("reason ", reason, " of a newer tool");
      in.untraced_exec = std::move(exec);
      return 0;
    }
    case VGPT_EXIT: {
      p.U32();  // exit code: the recorder has it from waitpid
      EndProcess(in);
      ++stats_.exits;
      return 0;
    }
    case VGPT_DUMP: {
      const uint64_t vaddr = p.U64();
      const uint32_t size = p.U32();
      const std::string name = p.String();
      absl::Span<const uint8_t> bytes = p.Bytes(size);
      if (!p.ok() || name != "[vdso]") {
        ++stats_.bad_records;
        return 0;
      }
      ImageEntry image;
      image.path = absl::StrCat(kImagesSubdir, "/vdso.", in.pid, ".so");
      image.name = name;
      image.vaddr = vaddr;
      image.size = size;
      image.pid = in.pid;
      image.kind = ImageKind::kVdso;
      if (absl::Status s = WriteFileAtomic(dir_->FilePath(image.path), bytes); !s.ok()) {
        notes_.push_back(absl::StrCat("could not save the [vdso] of ", in.pid, ": ", s.message()));
        return 0;
      }
      images_.push_back(image);
      Mmap2Record map;
      map.pid = map.tid = static_cast<uint32_t>(in.pid);
      map.addr = vaddr;
      map.len = size;
      map.prot = PROT_READ | PROT_EXEC;
      map.flags = MAP_PRIVATE;
      map.filename = name;
      AddRecord(map, in.pid, in.pid, Tick(*in.process));
      return 0;
    }
    default:
      ++stats_.bad_records;  // a newer tool's record: skipped
      return 0;
  }
}

void VgptConverter::EndProcess(Instance& in) {
  std::vector<Thread*> mine;
  for (auto& [tid, thread] : threads_) {
    if (thread->pid == in.pid) mine.push_back(thread.get());
  }
  // The main thread's record last, as the kernel writes the group leader's exit last.
  std::sort(mine.begin(), mine.end(), [&](Thread* a, Thread* b) {
    return (a->tid == in.pid) < (b->tid == in.pid) || ((a->tid == in.pid) == (b->tid == in.pid) && a->tid < b->tid);
  });
  for (Thread* t : mine) EndThread(in, *t);
  in.exited = true;
  in.process->alive = false;
}

void VgptConverter::CloseInstance(int instance) {
  Instance& in = *instances_[instance];
  if (in.closed) return;
  in.closed = true;
  if (!in.hello) return;
  in.process->closed_instances.insert(in.number);
  if (in.exited) return;
  if (in.untraced_exec) {
    // The exec went through, untraced: the old program ends here and the new one runs
    // unseen until the process exits, a gap in the trace, not the old program running on.
    const UntracedExec& exec = *in.untraced_exec;
    notes_.push_back(absl::StrCat("pid ", exec.pid, " exec'd ", exec.program, ", which ran untraced (",
                                  exec.reason, "); the trace of that process ends at the exec"));
    untraced_execs_.push_back(exec);
    CommRecord comm;
    comm.pid = comm.tid = static_cast<uint32_t>(in.pid);
    comm.comm = CommOf(exec.program);
    comm.exec = true;
    AddRecord(comm, in.pid, in.pid, Tick(*in.process));
    EndProcess(in);
    return;
  }
  if (in.last_was_exec) {
    // The exec went through (or the process died in it): the next instance of the pid
    // continues its main thread; Finish ends it if none comes.
    in.process->exec_pending = true;
    return;
  }
  // Killed (SIGKILL), the tool could not write (disk full), or the recording stopped
  // before the program ended.
  ++stats_.cut_short;
  std::vector<Thread*> mine;
  for (auto& [tid, thread] : threads_) {
    if (thread->pid == in.pid) mine.push_back(thread.get());
  }
  for (Thread* t : mine) EndThread(in, *t);
  in.process->alive = false;
}

absl::Status VgptConverter::Snapshot(const std::string& reason) {
  return streams_->Snapshot(reason, newest_time_ + 1);
}

absl::Status VgptConverter::Finish(TraceMeta* meta) {
  for (size_t i = 0; i < instances_.size(); ++i) CloseInstance(static_cast<int>(i));
  // Threads left by an exec whose program never started.
  std::vector<std::pair<Instance*, Thread*>> left;
  for (auto& [tid, thread] : threads_) {
    for (auto& in : instances_) {
      if (in->pid == thread->pid && in->process != nullptr) {
        left.emplace_back(in.get(), thread.get());
        break;
      }
    }
  }
  for (auto& [in, thread] : left) EndThread(*in, *thread);

  absl::Status status = streams_->Finish(newest_time_ + 1, meta);
  std::stable_sort(records_.begin(), records_.end(),
                   [](const TimedRecord& a, const TimedRecord& b) { return a.time < b.time; });
  RecordBuilder builder;
  for (const TimedRecord& r : records_) builder.Append(r.record);
  SidebandFile file;
  file.file = absl::StrCat(kSidebandSubdir, "/valgrind.data");
  file.cpu = -1;
  // Made by the emulator as the program ran, each with its time (not a /proc synthesis,
  // which stands for the state at time 0).
  file.origin = "emulator";
  file.sample_type = builder.format().sample_type;
  file.sample_id_all = builder.format().sample_id_all;
  if (absl::Status s = WriteFileAtomic(dir_->FilePath(file.file), absl::Span<const uint8_t>(builder.bytes()));
      !s.ok() && status.ok()) {
    status = s;
  }
  meta->sideband.push_back(file);
  if (absl::Status s = jit_capture_.Write(*dir_, &notes_); !s.ok() && status.ok()) status = s;
  for (const auto& [pid, fd] : jitdump_fds_) {
    const std::string rel = absl::StrCat(kImagesSubdir, "/jit-", pid, ".dump");
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(absl::StrCat("/proc/self/fd/", fd));
    absl::Status st = bytes.ok() ? WriteFileAtomic(dir_->FilePath(rel), absl::MakeConstSpan(*bytes)) : bytes.status();
    notes_.push_back(st.ok() ? absl::StrCat("copied the jitdump of pid ", pid, " (held open since it was mapped) to ", rel)
                             : absl::StrCat("the jitdump of pid ", pid, " not copied: ", st.message()));
  }
  meta->images.insert(meta->images.end(), images_.begin(), images_.end());
  meta->notes.insert(meta->notes.end(), notes_.begin(), notes_.end());
  return status;
}

}  // namespace ptd
