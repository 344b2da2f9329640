// VgptConverter's reading of the tool's control records (all but block executions):
// processes and threads beginning and ending, blocks described, system calls' times,
// mappings, forks, execs and the [vdso].
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/monotonic_clock.h"
#include "image/jitdump.h"
#include "recorder/valgrind/tool/vgpt_stream.h"
#include "recorder/valgrind/vgpt_converter.h"
#include "recorder/valgrind/vgpt_converter_state.h"

namespace ptd {
namespace {

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

}  // namespace

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

}  // namespace ptd
