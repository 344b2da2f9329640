// VgptConverter: instances and their records, threads, the blocks they run and how each
// left (retired into the PT streams), and the end of the recording. The control records
// are read in vgpt_control_records.cc.
#include "recorder/valgrind/vgpt_converter.h"

#include <linux/perf_event.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "image/jitdump.h"
#include "recorder/valgrind/tool/vgpt_stream.h"
#include "recorder/valgrind/vgpt_converter_state.h"
#include "sideband/record_builder.h"

namespace ptd {
namespace {

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

}  // namespace

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
