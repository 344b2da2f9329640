#include "recorder/ptgen/pt_stream_set.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "recorder/ptgen/file_sink.h"
#include "recorder/ptgen/snapshot_ring_sink.h"
#include "recorder/session/stream_cut.h"

namespace ptd {


struct PtStreamSet::Stream {
  int cpu = -1;
  int tid = -1;
  std::string relative_path;
  std::unique_ptr<FileSink> file;
  std::unique_ptr<SnapshotRingSink> ring;
  std::unique_ptr<PacketGenerator> generator;
  // Per-CPU mode: who runs on this virtual CPU now, and the records we synthesize.
  int current_pid = -1;
  int current_tid = -1;
  int last_pid = 0;  // the previous task, for switch-in records (0: idle)
  int last_tid = 0;
  std::unordered_map<int, bool> itrace_started;
  std::unique_ptr<RecordBuilder> sideband;
  bool finished = false;
  std::vector<PtChunk> chunks;
  uint64_t taken_head = 0;  // stream position the last chunk ended at
  uint64_t file_bytes = 0;  // bytes in the stream file (snapshot mode)
  // Per-CPU mode: the time of the newest packet or record of this CPU.
  uint64_t clock = 0;
  // Overflow injection: the stream size at which the next one is due, and how many
  // instructions of the stream's thread are still to be lost to the last one.
  uint64_t next_overflow = 0;
  uint64_t silent = 0;
  // trim_marks: (time, stream offset) of each PSB+, oldest first.
  std::vector<std::pair<uint64_t, uint64_t>> psb_marks;
};

PtStreamSet::PtStreamSet(const PtStreamSetOptions& options, const TraceDirWriter* dir)
    : options_(options), dir_(dir) {
  for (int cpu = 0; cpu < options_.virtual_cpus; ++cpu) NewStream(cpu, -1);
}

PtStreamSet::~PtStreamSet() = default;

PtStreamSet::Stream* PtStreamSet::NewStream(int cpu, int tid) {
  auto stream = std::make_unique<Stream>();
  stream->cpu = cpu;
  stream->tid = tid;
  stream->relative_path = cpu >= 0 ? absl::StrCat(kAuxSubdir, "/cpu", cpu, ".pt")
                                   : absl::StrCat(kAuxSubdir, "/tid", tid, ".pt");
  PacketSink* sink = nullptr;
  // Linear mode: the generator writes the file; snapshot mode: a ring, whose chunks are
  // appended to the file as they are taken.
  stream->file = std::make_unique<FileSink>(dir_->FilePath(stream->relative_path));
  sink = stream->file.get();
  if (options_.snapshot) {
    stream->ring = std::make_unique<SnapshotRingSink>(options_.snapshot_size);
    sink = stream->ring.get();
  }
  stream->generator = std::make_unique<PacketGenerator>(options_.generator, sink);
  stream->next_overflow = options_.overflow_every_bytes;
  if (cpu >= 0) stream->sideband = std::make_unique<RecordBuilder>();
  streams_.push_back(std::move(stream));
  return streams_.back().get();
}

PtStreamSet::ThreadSlot& PtStreamSet::Slot(int pid, int tid, uint64_t time) {
  auto [it, inserted] = threads_.try_emplace(tid);
  ThreadSlot& slot = it->second;
  if (inserted || slot.stream == nullptr) {
    slot.pid = pid;
    if (options_.virtual_cpus > 0) {
      slot.vcpu = next_vcpu_;
      next_vcpu_ = (next_vcpu_ + 1) % options_.virtual_cpus;
      slot.stream = streams_[slot.vcpu].get();
    } else {
      slot.stream = NewStream(-1, tid);
    }
  }
  slot.pid = pid;
  (void)time;
  return slot;
}

uint64_t PtStreamSet::CpuTime(Stream* stream, uint64_t time) {
  stream->clock = std::max(stream->clock, time);
  return stream->clock;
}

uint64_t PtStreamSet::SwitchTo(Stream* stream, int pid, int tid, uint64_t time) {
  if (stream->current_tid == tid) return CpuTime(stream, time);
  // On hardware a context switch runs in the kernel: the old thread's trace ends
  // (FUP + TIP.PGD) before the switch is recorded, and the new thread's TIP.PGE (with
  // its TSC) comes after. The times say so strictly, so a decoder that routes by time
  // (the PGE's TSC against the switch records) cannot pick the wrong side. The old
  // thread is preempted right after its last instruction; the switch lies between.
  uint64_t out_time = stream->clock;
  const bool switching_out = stream->current_tid >= 0;
  if (switching_out) ++out_time;
  const uint64_t in_time = std::max(time, out_time + 2);
  const uint64_t switch_time = switching_out ? out_time + (in_time - out_time) / 2 : in_time - 1;
  SampleId id;
  id.time = switch_time;
  id.cpu = static_cast<uint32_t>(stream->cpu);
  if (switching_out) {
    // The old thread is preempted before the instruction it would run next.
    auto it = threads_.find(stream->current_tid);
    const uint64_t resume_ip = it == threads_.end() ? 0 : it->second.resume_ip;
    stream->generator->AsyncDisable(resume_ip, out_time);
    SwitchCpuWideRecord out;
    out.out = true;
    out.preempt = true;
    out.next_prev_pid = static_cast<uint32_t>(pid);
    out.next_prev_tid = static_cast<uint32_t>(tid);
    id.pid = static_cast<uint32_t>(stream->current_pid);
    id.tid = static_cast<uint32_t>(stream->current_tid);
    stream->sideband->Append(out, id);
    stream->last_pid = stream->current_pid;
    stream->last_tid = stream->current_tid;
    ++counted_.context_switches;
  }
  // The decoder's return-compression stack belongs to the previous thread.
  stream->generator->ClearReturnStack();
  SwitchCpuWideRecord in;
  in.out = false;
  in.next_prev_pid = static_cast<uint32_t>(stream->last_pid);
  in.next_prev_tid = static_cast<uint32_t>(stream->last_tid);
  id.pid = static_cast<uint32_t>(pid);
  id.tid = static_cast<uint32_t>(tid);
  stream->sideband->Append(in, id);
  if (!stream->itrace_started[tid]) {
    stream->itrace_started[tid] = true;
    ItraceStartRecord start;
    start.pid = static_cast<uint32_t>(pid);
    start.tid = static_cast<uint32_t>(tid);
    stream->sideband->Append(start, id);
  }
  stream->current_pid = pid;
  stream->current_tid = tid;
  stream->clock = in_time;
  return in_time;
}

bool PtStreamSet::Retire(int pid, int tid, const ExecutedInsn& insn, uint64_t time, uint64_t length) {
  ThreadSlot& slot = Slot(pid, tid, time);
  Stream* stream = slot.stream;
  if (stream->silent > 0) {
    // Lost to the overflow: the CPU wrote nothing for it.
    --stream->silent;
    ++counted_.lost_instructions;
    slot.resume_ip = insn.next_ip;
    return false;
  }
  if (stream->cpu >= 0) time = SwitchTo(stream, pid, tid, time);
  // SwitchTo may have inserted nothing into threads_, so `slot` is still valid.
  slot.resume_ip = insn.next_ip;
  const PacketGeneratorStats& before = stream->generator->stats();
  const uint64_t anchors_before = before.psbs + before.enables;
  const uint64_t psbs_before = before.psbs;
  const uint64_t bytes_before = before.bytes;
  stream->generator->Retire(insn, time, length);
  NotePsb(stream, psbs_before, bytes_before, time);
  if (stream->next_overflow != 0) MaybeInjectOverflow(stream, insn, time, anchors_before);
  return true;
}

void PtStreamSet::RetireStraight(int pid, int tid, uint64_t first_ip, uint64_t count, uint64_t time) {
  ThreadSlot& slot = Slot(pid, tid, time);
  const PacketGeneratorStats before = slot.stream->generator->stats();
  slot.stream->generator->RetireStraight(first_ip, count, time);
  NotePsb(slot.stream, before.psbs, before.bytes, time);
}

void PtStreamSet::NotePsb(Stream* stream, uint64_t psbs_before, uint64_t bytes_before, uint64_t time) {
  if (!options_.trim_marks || stream->generator->stats().psbs == psbs_before) return;
  stream->psb_marks.emplace_back(time, bytes_before);
}

void PtStreamSet::RetireBlock(int pid, int tid, uint64_t first_ip, uint64_t straight,
                              const ExecutedInsn& last, uint64_t time, bool leaving) {
  ThreadSlot& slot = Slot(pid, tid, time);
  PacketGenerator* generator = slot.stream->generator.get();
  const PacketGeneratorStats before = generator->stats();
  generator->RetireStraight(first_ip, straight, time);
  if (leaving) {
    generator->RetireLeaving(last, time + straight);
  } else {
    generator->Retire(last, time + straight, /*length=*/1);
  }
  NotePsb(slot.stream, before.psbs, before.bytes, time);
  slot.resume_ip = last.next_ip;
}

void PtStreamSet::MaybeInjectOverflow(Stream* stream, const ExecutedInsn& insn, uint64_t time,
                                      uint64_t anchors_before) {
  const PacketGeneratorStats& stats = stream->generator->stats();
  if (stats.bytes < stream->next_overflow) return;
  // Right after an indirect jump, whose TIP is the last packet before the OVF: a decoder
  // then stops exactly after it (after a TNT bit it would run on into the lost code),
  // and the jump opens or closes no frame the decoder could not finish. Not where the
  // stream was just anchored (PSB+, TIP.PGE): the overflow would hide that.
  if (insn.kind != BranchKind::kIndirectJump) return;
  if (stats.psbs + stats.enables != anchors_before) return;
  stream->generator->InjectOverflow(time);
  stream->silent = options_.overflow_lost_instructions;
  stream->next_overflow = stats.bytes + options_.overflow_every_bytes;
  ++counted_.overflows;
}

bool PtStreamSet::AsyncDisable(int pid, int tid, uint64_t ip, uint64_t time) {
  auto it = threads_.find(tid);
  if (it == threads_.end() || it->second.stream == nullptr) return true;
  Stream* stream = it->second.stream;
  if (stream->silent > 0) return false;  // lost with the thread's instructions
  if (stream->cpu >= 0 && stream->current_tid != tid) return true;  // not on its CPU: disabled
  (void)pid;
  if (stream->cpu >= 0) time = CpuTime(stream, time);
  stream->generator->AsyncDisable(ip, time);
  return true;
}

void PtStreamSet::ThreadEnded(int pid, int tid, uint64_t next_ip, uint64_t time) {
  auto it = threads_.find(tid);
  if (it == threads_.end() || it->second.stream == nullptr) return;
  Stream* stream = it->second.stream;
  it->second.stream = nullptr;
  if (stream->cpu < 0) {
    stream->generator->Finish(next_ip, time);
    stream->finished = true;
    return;
  }
  if (stream->current_tid != tid) return;
  // Disabled strictly before the switch to idle, as at a switch to another thread.
  const uint64_t out_time = CpuTime(stream, time) + 1;
  stream->generator->AsyncDisable(next_ip, out_time);
  stream->clock = out_time + 1;
  SampleId id;
  id.time = stream->clock;
  id.cpu = static_cast<uint32_t>(stream->cpu);
  id.pid = static_cast<uint32_t>(pid);
  id.tid = static_cast<uint32_t>(tid);
  SwitchCpuWideRecord out;
  out.out = true;  // to idle
  stream->sideband->Append(out, id);
  stream->last_pid = pid;
  stream->last_tid = tid;
  stream->current_pid = -1;
  stream->current_tid = -1;
}

absl::Status PtStreamSet::Finish(uint64_t time, TraceMeta* meta) {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  absl::Status first_error;
  for (auto& [tid, slot] : threads_) {
    if (slot.stream == nullptr) continue;
    if (slot.stream->cpu < 0) {
      slot.stream->generator->Finish(slot.resume_ip, time);
    } else if (slot.stream->current_tid == tid) {
      slot.stream->generator->AsyncDisable(slot.resume_ip, CpuTime(slot.stream, time));
    }
  }
  for (auto& stream : streams_) {
    stream->generator->Flush();
    absl::Status taken = TakeChunk(stream.get(), options_.snapshot ? options_.end_reason : "linear", time);
    if (!taken.ok() && first_error.ok()) first_error = taken;
    absl::Status closed = stream->file->Close();
    if (!closed.ok() && first_error.ok()) first_error = closed;
    if (trim_from_ > 0 && closed.ok()) {
      absl::Status trimmed = Trim(stream.get());
      if (!trimmed.ok() && first_error.ok()) first_error = trimmed;
    }
    PtStream entry;
    entry.file = stream->relative_path;
    entry.cpu = stream->cpu;
    entry.tid = stream->tid;
    entry.chunks = stream->chunks;
    if (stream->sideband != nullptr) {
      SidebandFile file;
      file.file = absl::StrCat(kSidebandSubdir, "/vcpu", stream->cpu, ".data");
      file.cpu = stream->cpu;
      file.origin = "synthesized";
      file.sample_type = stream->sideband->format().sample_type;
      file.sample_id_all = stream->sideband->format().sample_id_all;
      absl::Status s = WriteFileAtomic(dir_->FilePath(file.file),
                                       absl::Span<const uint8_t>(stream->sideband->bytes()));
      if (!s.ok() && first_error.ok()) first_error = s;
      meta->sideband.push_back(file);
    }
    meta->streams.push_back(std::move(entry));
  }
  return first_error;
}

absl::Status PtStreamSet::Trim(Stream* stream) {
  uint64_t cut = 0;
  for (const auto& [time, offset] : stream->psb_marks) {
    if (time > trim_from_) break;
    cut = offset;
  }
  if (cut == 0 || options_.snapshot) return absl::OkStatus();
  return CutStreamFile(dir_->FilePath(stream->relative_path), cut, &stream->chunks);
}

absl::Status PtStreamSet::TakeChunk(Stream* stream, const std::string& reason, uint64_t time) {
  PtChunk chunk;
  chunk.time_ns = time;
  chunk.reason = reason;
  if (options_.snapshot) {
    const uint64_t head = stream->ring->head();
    std::vector<uint8_t> bytes = stream->ring->Since(stream->taken_head);
    chunk.aux_offset = head - bytes.size();
    chunk.size = bytes.size();
    chunk.overwrite = true;
    chunk.lost_before = chunk.aux_offset > stream->taken_head;
    chunk.file_offset = stream->file_bytes;
    stream->file->Write(bytes.data(), bytes.size());
    stream->file_bytes += bytes.size();
    stream->taken_head = head;
  } else {
    const uint64_t end = stream->file->bytes();
    chunk.aux_offset = chunk.file_offset = stream->taken_head;
    chunk.size = end - stream->taken_head;
    stream->taken_head = end;
  }
  if (chunk.size == 0) return absl::OkStatus();
  if (stream->sideband != nullptr) {
    AuxRecord aux;
    aux.aux_offset = chunk.aux_offset;
    aux.aux_size = chunk.size;
    aux.flags = chunk.overwrite ? kPerfAuxFlagOverwrite : 0;
    SampleId id;
    id.time = time;
    id.cpu = static_cast<uint32_t>(stream->cpu);
    id.pid = static_cast<uint32_t>(stream->current_pid < 0 ? stream->last_pid : stream->current_pid);
    id.tid = static_cast<uint32_t>(stream->current_tid < 0 ? stream->last_tid : stream->current_tid);
    stream->sideband->Append(aux, id);
  }
  stream->chunks.push_back(chunk);
  return absl::OkStatus();
}

absl::Status PtStreamSet::Snapshot(const std::string& reason, uint64_t time) {
  ++counted_.snapshots;
  if (options_.snapshot) {
    // The interrupt that stops the hardware is an asynchronous exit from user space.
    for (auto& [tid, slot] : threads_) {
      if (slot.stream == nullptr) continue;
      if (slot.stream->silent > 0) continue;  // nothing to disable in a lost stretch
      if (slot.stream->cpu < 0) {
        slot.stream->generator->AsyncDisable(slot.resume_ip, time);
      } else if (slot.stream->current_tid == tid) {
        slot.stream->generator->AsyncDisable(slot.resume_ip, CpuTime(slot.stream, time));
      }
    }
    for (auto& stream : streams_) stream->generator->RestartWithPsb();
  }
  absl::Status first_error;
  for (auto& stream : streams_) {
    if (stream->finished && options_.snapshot && stream->ring->head() == stream->taken_head) continue;
    stream->generator->Flush();
    absl::Status s = TakeChunk(stream.get(), reason, time);
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  return first_error;
}

PtStreamSetStats PtStreamSet::stats() const {
  PtStreamSetStats stats = counted_;
  for (const auto& stream : streams_) {
    stats.bytes += stream->generator->stats().bytes;
    stats.instructions += stream->generator->stats().instructions;
  }
  stats.streams = streams_.size();
  return stats;
}

}  // namespace ptd
