#include "recorder/emulate/code_walker.h"
#include "common/monotonic_clock.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "image/elf_reader.h"
#include "recorder/ptgen/file_sink.h"
#include "recorder/emulate/stack_frame_tracker.h"
#include "sideband/record_builder.h"

namespace ptd {
namespace {

constexpr uint64_t kDefaultLoadBase = 0x7f1200000000ull;
// A straight stretch without packets longer than this ends with an escape.
constexpr size_t kMaxPendingInstructions = 4096;
constexpr uint64_t kMaxLoopIterations = 16;
constexpr uint64_t kMaxLoopStretch = 2000;
constexpr uint64_t kMaxFlatStretch = 20000;
constexpr uint64_t kStackTop = 0x7ffff0000000ull;


}  // namespace

CodeWalker::CodeWalker(const CodeWalkerOptions& options) : options_(options), rng_(options.seed) {}

absl::StatusOr<std::unique_ptr<CodeWalker>> CodeWalker::Open(const CodeWalkerOptions& options) {
  std::unique_ptr<CodeWalker> walker(new CodeWalker(options));
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(options.elf_path);
  if (!bytes.ok()) return bytes.status();
  walker->file_ = std::move(*bytes);
  elf_version(EV_CURRENT);
  Elf* elf = elf_memory(reinterpret_cast<char*>(walker->file_.data()), walker->file_.size());
  GElf_Ehdr ehdr;
  if (elf == nullptr || gelf_getehdr(elf, &ehdr) == nullptr) {
    if (elf != nullptr) elf_end(elf);
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: offset 0: not an ELF file (%s)", options.elf_path, elf_errmsg(-1)));
  }
  const uint64_t bias = ehdr.e_type == ET_DYN
                            ? (options.load_base != 0 ? options.load_base : kDefaultLoadBase)
                            : 0;
  size_t phnum = 0;
  elf_getphdrnum(elf, &phnum);
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf, static_cast<int>(i), &phdr) == nullptr) continue;
    if (phdr.p_type != PT_LOAD || (phdr.p_flags & PF_X) == 0) continue;
    if (phdr.p_offset + phdr.p_filesz > walker->file_.size()) {
      elf_end(elf);
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: program header %u: segment extends past the end of the file", options.elf_path, i));
    }
    walker->segments_.push_back({bias + phdr.p_vaddr, phdr.p_offset, phdr.p_filesz});
  }
  elf_end(elf);
  // Exported (dynsym) functions, else every symtab function: the entry points.
  std::vector<uint64_t> exported, all;
  absl::Status walked = image::ForEachElfSymbol(walker->file_, options.elf_path, [&](const image::ElfSymbol& sym) {
    if (sym.type != STT_FUNC) return;
    const uint64_t address = bias + sym.value;
    for (const WalkerSegment& seg : walker->segments_) {
      if (address >= seg.vaddr && address < seg.vaddr + seg.size) {
        (sym.dynamic ? exported : all).push_back(address);
        break;
      }
    }
  });
  if (!walked.ok()) return walked;
  walker->functions_ = exported.empty() ? std::move(all) : std::move(exported);
  std::sort(walker->functions_.begin(), walker->functions_.end());
  walker->functions_.erase(std::unique(walker->functions_.begin(), walker->functions_.end()),
                           walker->functions_.end());
  if (walker->functions_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: no function symbols in executable segments to start from", options.elf_path));
  }
  return walker;
}

const image::InsnInfo* CodeWalker::Decode(uint64_t ip) {
  if (const image::InsnInfo* cached = classifier_.Find(ip)) return cached->size == 0 ? nullptr : cached;
  for (const WalkerSegment& seg : segments_) {
    if (ip < seg.vaddr || ip >= seg.vaddr + seg.size) continue;
    const uint64_t offset = seg.file_offset + (ip - seg.vaddr);
    const uint64_t available = std::min<uint64_t>(16, seg.vaddr + seg.size - ip);
    const image::InsnInfo& info =
        classifier_.Classify(ip, absl::Span<const uint8_t>(file_.data() + offset, available));
    return info.size == 0 ? nullptr : &info;
  }
  return nullptr;
}

uint64_t CodeWalker::RandomFunction() {
  return functions_[std::uniform_int_distribution<size_t>(0, functions_.size() - 1)(rng_)];
}

bool CodeWalker::Chance(uint32_t percent) {
  return std::uniform_int_distribution<uint32_t>(0, 99)(rng_) < percent;
}

CodeWalkerStats CodeWalker::Walk(PacketSink* sink, GroundTruthWriter* truth) {
  CodeWalkerStats stats;
  stats.functions = functions_.size();
  const double start = MonotonicSeconds();
  PacketGenerator generator(options_.generator, sink);
  StackFrameTracker frames(options_.pid, options_.tid);
  std::vector<uint64_t> stack;
  uint64_t rsp = kStackTop;
  uint64_t ip = RandomFunction();
  uint64_t silent = 0;  // instructions still to lose after an injected overflow
  uint64_t next_overflow = options_.overflow_every_bytes;
  uint64_t time = 1;
  const int pid = options_.pid;
  const int tid = options_.tid;

  // Instructions since the last packet a decoder must consume (TNT bit, TIP, FUP of a
  // PSB+ or enable). A decoder follows such a stretch from the code alone, so an
  // asynchronous disable (FUP) in it binds to the FIRST time execution reaches the FUP's
  // IP. If the walk comes back to an IP of the stretch (a loop without conditional
  // branches), the instructions from its first visit on are taken back and the walk
  // escapes there, so ground truth and decoder agree.
  struct Pending {
    ExecutedInsn insn;
    uint64_t rsp_before = 0;
    uint64_t rsp_after = 0;
    uint64_t time = 0;
    size_t stack_size = 0;  // walker stack depth before the instruction
  };
  std::vector<Pending> pending;
  pending.reserve(kMaxPendingInstructions + 1);
  auto commit = [&](size_t count) {
    for (size_t i = 0; i < count; ++i) {
      const Pending& p = pending[i];
      ++stats.instructions;
      if (truth != nullptr) {
        truth->Instruction(pid, tid, p.insn.ip, p.time);
        frames.OnRetire(p.insn, p.rsp_before, p.rsp_after, p.time, truth);
        if (p.insn.kind == BranchKind::kFarTransfer) truth->Syscall(pid, tid, p.time, p.insn.ip);
      }
    }
    pending.clear();
  };
  auto escape = [&]() {
    commit(pending.size());
    if (silent == 0) {
      generator.AsyncDisable(ip, time);
      // Calls the decoder never saw may sit on the return-compression stack.
      generator.ClearReturnStack();
    }
    if (frames.depth() > 0 && truth != nullptr) {
      truth->Unwind(pid, tid, time, ip, 0, frames.depth(), 0);
    }
    frames.Reset();
    stack.clear();
    rsp = kStackTop;
    ip = RandomFunction();
    ++stats.escapes;
  };
  // A call: the walker's stack and RSP take its return address.
  auto push_return = [&](uint64_t address) {
    stack.push_back(address);
    rsp -= 8;
    ++stats.calls;
  };

  bool check_revisit = false;
  uint64_t loop_branch = 0;  // the backward branch taken last, and how often in a row
  uint64_t loop_iterations = 0;
  uint64_t since_call_or_return = 0;  // instructions; beyond kMaxLoopStretch loops exit
  while (stats.instructions + pending.size() < options_.max_instructions &&
         (options_.max_pt_bytes == 0 || generator.stats().bytes < options_.max_pt_bytes)) {
    if (check_revisit && silent == 0) {
      check_revisit = false;
      size_t first = pending.size();
      for (size_t i = 0; i < pending.size(); ++i) {
        if (pending[i].insn.ip == ip) {
          first = i;
          break;
        }
      }
      if (first < pending.size()) {
        // Take back the cycle: the walker's stack and RSP as before its first visit.
        stack.resize(pending[first].stack_size);
        rsp = pending[first].rsp_before;
        pending.resize(first);
        escape();
        continue;
      }
    }
    if (since_call_or_return > kMaxFlatStretch) {
      // Code that only loops (e.g. _exit's syscall loop, which really never returns):
      // leave it. The FUP must not name an IP passed since the last packet.
      for (size_t i = 0; i < pending.size(); ++i) {
        if (pending[i].insn.ip == ip) {
          stack.resize(pending[i].stack_size);
          rsp = pending[i].rsp_before;
          pending.resize(i);
          break;
        }
      }
      since_call_or_return = 0;
      escape();
      continue;
    }
    const image::InsnInfo* info = Decode(ip);
    if (info == nullptr || pending.size() >= kMaxPendingInstructions) {
      escape();
      continue;
    }
    ExecutedInsn insn;
    insn.ip = ip;
    insn.size = info->size;
    insn.kind = info->kind;
    const uint64_t fall_through = ip + info->size;
    const uint64_t rsp_before = rsp;
    const size_t stack_size = stack.size();
    bool packet = false;
    switch (info->kind) {
      case BranchKind::kNone:
      case BranchKind::kUnknown:
        insn.next_ip = fall_through;
        break;
      case BranchKind::kCondJump: {
        const bool backward = info->direct_target <= ip;
        bool taken = Chance(backward ? options_.backward_taken_percent
                                     : options_.forward_taken_percent);
        // Bound every loop, nested ones too, so the walk moves on through the library.
        if (backward && taken) {
          loop_iterations = ip == loop_branch ? loop_iterations + 1 : 1;
          loop_branch = ip;
          if (loop_iterations > kMaxLoopIterations || since_call_or_return > kMaxLoopStretch) {
            taken = false;
          }
        }
        insn.next_ip = taken ? info->direct_target : fall_through;
        packet = true;
        break;
      }
      case BranchKind::kDirectJump:
        insn.next_ip = info->direct_target;
        check_revisit = true;
        break;
      case BranchKind::kDirectCall:
        insn.next_ip = info->direct_target;
        if (insn.next_ip != fall_through) push_return(fall_through);
        check_revisit = true;
        break;
      case BranchKind::kIndirectCall:
        insn.next_ip = RandomFunction();
        push_return(fall_through);
        packet = true;
        break;
      case BranchKind::kIndirectJump:
        insn.next_ip = RandomFunction();
        packet = true;
        break;
      case BranchKind::kReturn:
        if (!stack.empty()) {
          insn.next_ip = stack.back();
          stack.pop_back();
          rsp += 8;
        } else {
          insn.next_ip = RandomFunction();
        }
        ++stats.returns;
        packet = true;
        break;
      case BranchKind::kFarTransfer:
        // A system call returns to the next instruction.
        insn.next_ip = fall_through;
        packet = true;
        break;
    }
    if (silent > 0) {
      --silent;
      ++stats.lost_instructions;
    } else {
      const uint64_t anchors_before = generator.stats().psbs + generator.stats().enables;
      generator.Retire(insn, time);
      // A PSB+ or an enable just told the decoder where it is: the stretch restarts here.
      const bool anchored = generator.stats().psbs + generator.stats().enables != anchors_before;
      if (anchored) commit(pending.size());
      pending.push_back({insn, rsp_before, rsp, time, stack_size});
      if (packet) commit(pending.size());
      // Overflow right after an instruction that produced a packet: a decoder then knows
      // exactly where the trace broke off (instructions after the last packet before an
      // OVF cannot be decoded, on hardware either).
      if (next_overflow != 0 && generator.stats().bytes >= next_overflow && packet && !anchored) {
        commit(pending.size());
        generator.InjectOverflow(time);
        silent = options_.overflow_lost_instructions;
        if (truth != nullptr) truth->Lost(pid, tid, time, silent);
        next_overflow = generator.stats().bytes + options_.overflow_every_bytes;
      }
    }
    const bool call_or_return = insn.kind == BranchKind::kDirectCall ||
                                insn.kind == BranchKind::kIndirectCall ||
                                insn.kind == BranchKind::kReturn ||
                                insn.kind == BranchKind::kIndirectJump;
    since_call_or_return = call_or_return ? 0 : since_call_or_return + 1;
    ip = insn.next_ip;
    ++time;
  }
  // The final FUP must not point into a stretch the walk already passed through.
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i].insn.ip == ip) {
      pending.resize(i);
      break;
    }
  }
  commit(pending.size());
  generator.Finish(ip, time);
  if (truth != nullptr) truth->End(pid, tid, time);
  stats.packets = generator.stats();
  stats.seconds = MonotonicSeconds() - start;
  return stats;
}

absl::StatusOr<CodeWalkerStats> WriteWalkerTrace(const CodeWalkerOptions& options,
                                                 const std::string& output_dir, bool force,
                                                 const std::string& truth_path) {
  absl::StatusOr<std::unique_ptr<CodeWalker>> walker = CodeWalker::Open(options);
  if (!walker.ok()) return walker.status();
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(output_dir, force);
  if (!dir.ok()) return dir.status();
  std::optional<GroundTruthWriter> truth;
  if (!truth_path.empty()) {
    absl::StatusOr<GroundTruthWriter> writer = GroundTruthWriter::Create(truth_path);
    if (!writer.ok()) return writer.status();
    truth.emplace(std::move(*writer));
  }
  const std::string stream_file = absl::StrCat(kAuxSubdir, "/tid", options.tid, ".pt");
  FileSink sink(dir->FilePath(stream_file));
  CodeWalkerStats stats = (*walker)->Walk(&sink, truth ? &*truth : nullptr);
  if (absl::Status s = sink.Close(); !s.ok()) return s;
  if (truth) {
    if (absl::Status s = truth->Close(); !s.ok()) return s;
  }

  // Sideband: the process's name and the ELF's executable segments, stamped at time 0,
  // before the first TSC of the stream (time 1).
  RecordBuilder sideband;
  SampleId id;
  id.pid = static_cast<uint32_t>(options.pid);
  id.tid = static_cast<uint32_t>(options.tid);
  id.time = 0;
  CommRecord comm;
  comm.pid = id.pid;
  comm.tid = id.tid;
  comm.comm = "walker";
  comm.exec = true;
  sideband.Append(comm, id);
  TraceMeta meta;
  for (const WalkerSegment& seg : (*walker)->segments()) {
    Mmap2Record m;
    m.pid = id.pid;
    m.tid = id.tid;
    m.addr = seg.vaddr & ~0xfffull;
    m.pgoff = seg.file_offset & ~0xfffull;
    m.len = seg.size + (seg.vaddr & 0xfff);
    m.prot = PROT_READ | PROT_EXEC;
    m.flags = MAP_PRIVATE;
    m.filename = options.elf_path;
    sideband.Append(m, id);
    meta.images.push_back(ImageEntry{options.elf_path, options.elf_path, m.addr, m.pgoff, m.len,
                                     options.pid, ImageKind::kFile, ""});
  }
  const std::string sideband_file = absl::StrCat(kSidebandSubdir, "/synth.data");
  if (absl::Status s = WriteFileAtomic(dir->FilePath(sideband_file),
                                       absl::Span<const uint8_t>(sideband.bytes()));
      !s.ok()) {
    return s;
  }
  meta.host = ReadHostInfo();
  meta.mode = TraceMode::kEmulated;
  meta.pt.pmu_type = -1;
  meta.pt.timing = "low";
  meta.pt.user_only = true;
  meta.pt.fields["tsc"] = 1;
  meta.pt.fields["noretcomp"] = options.generator.noretcomp ? 1 : 0;
  meta.pt.psb_period_bytes = options.generator.psb_period;
  meta.time.cap_user_time_zero = true;  // identity: the walker's clock is 1 ns per instruction
  meta.command = {"walker", options.elf_path, absl::StrCat("--seed=", options.seed)};
  meta.pids = {options.pid};
  meta.per = "thread";
  PtStream stream;
  stream.file = stream_file;
  stream.tid = options.tid;
  PtChunk chunk;
  chunk.size = sink.bytes();
  chunk.reason = "linear";
  chunk.time_ns = stats.instructions + stats.lost_instructions + 1;
  if (chunk.size > 0) stream.chunks.push_back(chunk);
  meta.streams.push_back(stream);
  SidebandFile sb;
  sb.file = sideband_file;
  sb.tid = options.tid;
  sb.origin = "synthesized";
  sb.sample_type = sideband.format().sample_type;
  sb.sample_id_all = sideband.format().sample_id_all;
  meta.sideband.push_back(sb);
  meta.end_reason = "exit";
  meta.start_ns = 0;
  meta.end_ns = chunk.time_ns;
  meta.notes.push_back(absl::StrFormat(
      "synthetic walk over %s (seed %u): %u instructions, %u escapes, %u lost to injected "
      "overflows", options.elf_path, options.seed, stats.instructions, stats.escapes,
      stats.lost_instructions));
  if (absl::Status s = dir->Commit(meta); !s.ok()) return s;
  return stats;
}

}  // namespace ptd
