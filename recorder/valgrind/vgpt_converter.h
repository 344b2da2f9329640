#pragma once
// Turns the streams of ptrace-direct's Valgrind tool (recorder/valgrind/tool/vgpt_stream.h)
// into what a hardware recording holds: PT packets per thread (through PtStreamSet, the
// same generator the ptrace backend uses) and perf sideband records (COMM, MMAP2, FORK,
// EXIT) on the same clock, plus the [vdso] image.
//
// Which way a block left is known only when its thread's next block starts (or from the
// resume IP of a switch or signal record), so every thread keeps one pending block and
// retires it then: straight instructions in one call, the last one with its target.
//
// Time: by default a virtual clock of one instruction per ns per process (CPU work is
// proportional to instructions, independent of Valgrind's speed) on which a system call
// lasts as long as the tool measured it (VGPT_SYSCALL_TIME); a forked child's clock starts
// at its parent's fork, an exec'd program continues its process's clock. With wall_clock,
// a process's clock is CLOCK_MONOTONIC at each system call's start and end and at each of
// the tool's stamps (VGPT_TIME, at least every 51,200 instructions), and stands in
// between: the decoder spreads the time between two over the instructions between them.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "recorder/images/jit_capture.h"
#include "recorder/ptgen/pt_stream_set.h"
#include "sideband/perf_record.h"

namespace ptd {

struct VgptConverterOptions {
  bool wall_clock = false;
  uint64_t clock_start = 1000;  // virtual ns of the first process's start
  // Asked of every mapping of an executable file: addresses at which to fire `on_trigger`
  // (--trigger), given the mapping. Empty: none.
  std::function<std::vector<uint64_t>(const Mmap2Record&)> trigger_addresses;
  // Told of every mapping of an executable file as it is read, usually while the process
  // still runs (the recorder pins the file for its archive). Unset: nothing.
  std::function<void(const Mmap2Record&)> on_map;
  // A thread is about to run a trigger address (once per entry of the block holding it),
  // with its stack key and the time. The stack key stands in for the stack pointer,
  // which the tool does not report: it is kStackKeyBase - 8 * call depth (calls and
  // signal deliveries deepen, returns climb), so it moves as RSP would.
  std::function<void(int pid, int tid, uint64_t address, uint64_t stack_key, uint64_t time)> on_trigger;
  // A return retired (only called when set): the thread's new stack key and the time.
  std::function<void(int pid, int tid, uint64_t stack_key, uint64_t time)> on_return;
};

inline constexpr uint64_t kStackKeyBase = uint64_t{1} << 62;

struct VgptConverterStats {
  uint64_t blocks = 0;          // block executions
  uint64_t instructions = 0;    // retired into the trace
  uint64_t processes = 0;       // tool instances (a process, or a process after an exec)
  uint64_t threads = 0;
  uint64_t signals = 0;
  uint64_t forks = 0;           // forked children whose stream began
  uint64_t forks_begun = 0;     // forks their parents' streams announce (a child may not have begun yet)
  uint64_t execs = 0;
  uint64_t faults = 0;          // signals that interrupted a block in its middle
  uint64_t hidden_blocks = 0;   // executions of Valgrind's own code (not traced)
  uint64_t side_exits = 0;      // blocks VEX left in their middle (emulation warnings, CAS retries)
  uint64_t unknown_blocks = 0;  // executions of an id never described (a damaged stream)
  uint64_t bad_records = 0;     // control records that made no sense (skipped)
  uint64_t exits = 0;           // instances that ended with an exit record
  uint64_t cut_short = 0;       // instances whose stream ended with the program still in it
  // CPU work between the tool's wall stamps with no system call in between: how fast the
  // target ran under the emulator.
  uint64_t work_ns = 0;
  uint64_t work_instructions = 0;
};

// A program a traced process exec'd that ran untraced.
struct UntracedExec {
  int pid = 0;
  std::string program;  // the path the exec named
  std::string reason;   // why it was not traced
};

class VgptConverter {
 public:
  // `streams` and `dir` must outlive the converter.
  VgptConverter(const VgptConverterOptions& options, PtStreamSet* streams, const TraceDirWriter* dir);
  ~VgptConverter();
  VgptConverter(const VgptConverter&) = delete;
  VgptConverter& operator=(const VgptConverter&) = delete;

  // A new stream file (one tool instance); `name` is for messages. Instances of one pid
  // must be fed in order (an exec'd program's after its predecessor's CloseInstance).
  int OpenInstance(const std::string& name);
  // Consumes the complete records at the front of `words` and returns how many words
  // it took (an incomplete record at the end waits for more). 0 with `waiting` set: a
  // forked child whose parent has not reached the fork yet; feed the others first.
  size_t Feed(int instance, absl::Span<const uint32_t> words, bool* waiting);
  // No more data will come for this instance: threads still running are finished where
  // they were (the program was killed, or recording stopped).
  void CloseInstance(int instance);
  // True once the instance wrote its exit record.
  bool Exited(int instance) const;
  // The process of an instance (0 before its hello record).
  int PidOf(int instance) const;

  // Nothing else can move (the spool's final reading): a forked child whose parent's
  // fork was never read starts at its parent's latest time (or on its own) instead of
  // waiting.
  void StopWaiting() { stop_waiting_ = true; }

  // Stops consuming: Feed takes nothing more (a --trigger that ends the recording calls it
  // from on_trigger; the block that hit it is the last one taken).
  void Stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }

  // A snapshot of every stream (PtStreamSet::Snapshot) at the newest time seen.
  absl::Status Snapshot(const std::string& reason);
  // Closes what is open, finishes the streams and writes sideband/valgrind.data and the
  // dumped images; fills meta's streams, sideband, images, command-independent notes.
  absl::Status Finish(TraceMeta* meta);

  const VgptConverterStats& stats() const { return stats_; }
  // Execs that went through untraced, as CloseInstance found them.
  const std::vector<UntracedExec>& untraced_execs() const { return untraced_execs_; }
  uint64_t newest_time() const { return newest_time_; }

 private:
  struct Block;
  struct Thread;
  struct Process;
  struct Instance;

  size_t FeedControl(Instance& in, uint32_t kind, absl::Span<const uint32_t> payload, bool* waiting);
  void RunBlock(Instance& in, uint32_t id);
  // The thread's pending block left towards `next_ip` (`leaving`: into code that is not
  // traced).
  void Resolve(Instance& in, Thread& thread, uint64_t next_ip, bool leaving = false);
  // The pending block was cut at `ip` (a fault) or completed towards it (asynchronous
  // signal, preemption): retire what ran, then disable at `ip`.
  void Interrupt(Instance& in, Thread& thread, uint64_t ip);
  void EndThread(Instance& in, Thread& thread);
  // The thread's pending block branches into Valgrind's code (at `target`).
  void LeaveForValgrindsCode(Instance& in, Thread& thread, uint64_t target);
  // Ends every thread of the instance's process (main thread last) and the process.
  void EndProcess(Instance& in);
  // How many of the block's instructions lie before `ip` (0 if it is not one's start).
  static uint64_t InstructionsBefore(const Instance& in, const Block& block, uint64_t ip);
  Thread& ThreadOf(Instance& in, int tid);
  uint64_t Tick(Process& process);  // a time for a sideband record, strictly increasing
  // The time `instructions` of CPU work take on the process clock (and counts them).
  uint64_t Work(Process& process, uint32_t instructions);
  // A wall stamp: CPU work ran from the last one to `now`, `instructions` (the process's
  // count at `now`) since.
  void Stamp(Process& process, uint64_t now, uint64_t instructions);
  void AddRecord(PerfRecordBody body, int pid, int tid, uint64_t time);

  VgptConverterOptions options_;
  PtStreamSet* streams_;
  const TraceDirWriter* dir_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::map<int, std::unique_ptr<Process>> processes_;
  absl::flat_hash_map<int, std::unique_ptr<Thread>> threads_;
  // Sideband records with their times; written sorted by time (processes' clocks are
  // independent, so their records arrive out of order).
  struct TimedRecord {
    uint64_t time;
    uint64_t seq;
    PerfRecord record;
  };
  std::vector<TimedRecord> records_;
  std::vector<ImageEntry> images_;
  JitCodeCapture jit_capture_;
  std::map<int, int> jitdump_fds_;  // pid → its jitdump, open since it was mapped
  std::vector<std::string> notes_;
  uint64_t newest_time_ = 0;
  bool stopped_ = false;
  bool stop_waiting_ = false;
  VgptConverterStats stats_;
  std::vector<UntracedExec> untraced_execs_;
};

}  // namespace ptd
