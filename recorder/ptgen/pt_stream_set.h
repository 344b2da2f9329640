#pragma once
// The PT streams of an emulated recording and who writes into which: per-thread mode
// has one generator (and aux/tid<N>.pt) per thread; per-CPU mode has one per virtual
// CPU (aux/cpu<N>.pt), threads assigned round-robin, and a thread change on a virtual
// CPU is what the hardware shows for a context switch (FUP + TIP.PGD of the old thread,
// TIP.PGE of the new one), with SWITCH_CPU_WIDE / ITRACE_START / AUX sideband records
// synthesized to match (sideband/vcpu<N>.data). As on hardware, where the switch runs in
// the kernel between the two, the times are strictly ordered: the old thread's last
// packet < the switch records < the new thread's TSC + TIP.PGE. Snapshot mode keeps the
// newest snapshot_size bytes of each stream, as an overwrite AUX ring would. Overflow
// injection (overflow_every_bytes) drops what a full internal buffer would.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <unordered_map>
#include "absl/status/status.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "recorder/ptgen/executed_insn.h"
#include "recorder/ptgen/packet_generator.h"
#include "sideband/record_builder.h"

namespace ptd {

struct PtStreamSetOptions {
  PacketGeneratorOptions generator;
  int virtual_cpus = 0;        // 0: per-thread streams
  bool snapshot = false;
  uint64_t snapshot_size = 4ull << 20;
  std::string end_reason = "exit";  // chunk reason of a snapshot taken at the end
  // Robustness tests (per-thread mode): once a stream has grown by this many bytes since
  // its last overflow, the next indirect jump is followed by an internal overflow (OVF)
  // that loses the thread's next `overflow_lost_instructions` instructions (0: never).
  uint64_t overflow_every_bytes = 0;
  uint64_t overflow_lost_instructions = 64;
  // --trim (per-thread, linear mode): remember where each PSB+ was written, so Finish can
  // cut the streams at the last PSB+ before TrimFrom's time.
  bool trim_marks = false;
};

struct PtStreamSetStats {
  uint64_t bytes = 0;
  uint64_t instructions = 0;
  uint64_t context_switches = 0;
  uint64_t streams = 0;
  uint64_t snapshots = 0;  // Snapshot() calls
  uint64_t overflows = 0;  // injected
  uint64_t lost_instructions = 0;  // executed but left out of the streams by them
};

class PtStreamSet {
 public:
  // `dir` must outlive this object; stream files are created in it.
  PtStreamSet(const PtStreamSetOptions& options, const TraceDirWriter* dir);
  ~PtStreamSet();
  PtStreamSet(const PtStreamSet&) = delete;
  PtStreamSet& operator=(const PtStreamSet&) = delete;

  // False: the instruction was lost to an injected overflow (not in the stream). It
  // starts at `time` and retires `length` later (PacketGenerator::Retire).
  bool Retire(int pid, int tid, const ExecutedInsn& insn, uint64_t time, uint64_t length = 0);
  // A basic block: `straight` fall-through instructions from `first_ip` retired at
  // time, time + 1, ..., then `last` at time + straight; a `last` that enters the kernel
  // (syscall) does so when it has run, at time + straight + 1, where the time the caller
  // charges for the call starts (its TIP.PGD is timed there). Per-thread mode without
  // overflow injection (the block-level Valgrind front end).
  void RetireStraight(int pid, int tid, uint64_t first_ip, uint64_t count, uint64_t time);
  // `leaving`: `last` branches out of the traced region (PacketGenerator::RetireLeaving).
  void RetireBlock(int pid, int tid, uint64_t first_ip, uint64_t straight, const ExecutedInsn& last,
                   uint64_t time, bool leaving = false);
  // Execution of `tid` left user space before `ip` retired (signal delivery). False
  // while the thread's instructions are being lost to an overflow (nothing is written).
  bool AsyncDisable(int pid, int tid, uint64_t ip, uint64_t time);
  // The thread is gone (or recording stops): its stream (per-thread) is finished at
  // `next_ip`, or its virtual CPU is released.
  void ThreadEnded(int pid, int tid, uint64_t next_ip, uint64_t time);

  // A snapshot (signal, control FIFO, trigger) tagged `reason`. Snapshot mode: every
  // enabled stream is disabled asynchronously at its thread's next IP (what the
  // interrupt that stops the hardware shows), and the bytes each ring received since the
  // previous snapshot, at most snapshot_size of them, become a chunk of the stream file
  // (lost_before when some were overwritten). Linear mode: the bytes written so far end
  // a chunk tagged `reason`, as a drain does in hardware mode.
  absl::Status Snapshot(const std::string& reason, uint64_t time);

  // Finishes every stream, takes the last chunk (reason: the end reason) and writes the
  // synthesized sideband; appends streams[] / sideband[] entries to `meta`.
  absl::Status Finish(uint64_t time, TraceMeta* meta);

  // --trim: Finish keeps of each stream only what follows its last PSB+ at or before
  // `time` (the decoder synchronizes there), rewriting the file; the first chunk kept is
  // marked lost_before. Needs trim_marks.
  void TrimFrom(uint64_t time) { trim_from_ = time; }

  PtStreamSetStats stats() const;
  // The chunk reason of snapshots taken by Finish() ("exit", "sigint", ...).
  void set_end_reason(const std::string& reason) { options_.end_reason = reason; }

 private:
  struct Stream;
  struct ThreadSlot {
    int pid = -1;
    Stream* stream = nullptr;
    uint64_t resume_ip = 0;  // where the thread continues (for a switch-out FUP)
    int vcpu = -1;
  };
  Stream* NewStream(int cpu, int tid);
  ThreadSlot& Slot(int pid, int tid, uint64_t time);
  // Per-CPU: makes `tid` the thread on the stream's CPU before an instruction it retired
  // at `time`; returns the time to stamp that instruction with (later than `time` only
  // when the CPU's clock is too close to it for the switch to fit between).
  uint64_t SwitchTo(Stream* stream, int pid, int tid, uint64_t time);
  // A time for the next packet or record of a per-CPU stream: its clock never goes back.
  static uint64_t CpuTime(Stream* stream, uint64_t time);
  // After an instruction that ended with a TIP: an overflow when one is due.
  void MaybeInjectOverflow(Stream* stream, const ExecutedInsn& insn, uint64_t time,
                           uint64_t anchors_before);
  absl::Status TakeChunk(Stream* stream, const std::string& reason, uint64_t time);
  // After the generator wrote at `time`: a PSB+ it began at or after `bytes_before`.
  void NotePsb(Stream* stream, uint64_t psbs_before, uint64_t bytes_before, uint64_t time);
  // Finish's part of TrimFrom, after the stream file is closed.
  absl::Status Trim(Stream* stream);

  PtStreamSetOptions options_;
  const TraceDirWriter* dir_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::unordered_map<int, ThreadSlot> threads_;
  int next_vcpu_ = 0;
  // The counters kept as things happen; stats() adds what the streams hold.
  PtStreamSetStats counted_;
  bool finished_ = false;
  uint64_t trim_from_ = 0;
};

}  // namespace ptd
