#pragma once
// A process's code image kept in step with the trace. The sideband's mapping changes
// (MMAP2, fork copies, exec) are applied when the decoder's time passes theirs, so code
// mapped later (dlopen) and addresses reused by a later mapping decode against the file
// that was there at that moment. Images without a time (meta.json's vDSO and memory
// dumps, the perf map) are in place from the start and again after every exec.
// Traces without timing packets cannot place changes in time: ApplyAll() maps
// everything ever mapped, later mappings replacing what they overlap.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <functional>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"
#include "common/missing_binaries.h"
#include "common/trace_meta.h"
#include "image/jitdump.h"
#include "image/process_image.h"
#include "sideband/mmap_timeline.h"
#include "sideband/sideband_set.h"

namespace ptd::image {

// Code that comes into place at a time without a mapping of its own in the sideband: JIT
// code from a jitdump, or code an emulator captured as it ran. `mapping.function` names it.
struct TimedCode {
  uint64_t time_ns = 0;
  Mapping mapping;
};

class TimedProcessImage {
 public:
  // `changes`: the process's map changes in time order (MmapTimeline::Changes);
  // `fixed`: mappings without a time; `perf_map`: a perf map file or "".
  TimedProcessImage(SectionCache* sections, ModuleCache* modules, std::string name,
                    std::vector<MapChange> changes, std::vector<Mapping> fixed,
                    std::string perf_map);

  // Adds JIT code to the changes (before the first AdvanceTo or ApplyAll). Code of equal
  // times is applied in the order given, after the sideband's changes of that time.
  void AddTimedCode(std::vector<TimedCode> code);
  // A problem found while building the image (a bad jitdump), reported with the others.
  void Warn(std::string warning);

  // Applies every change with time <= `time_ns` not applied yet. Going back in time
  // (another stream of the same process starts earlier) rebuilds from the beginning.
  void AdvanceTo(uint64_t time_ns);
  // Untimed traces: every mapping, in the order made; exec is ignored.
  void ApplyAll();

  ProcessImage* image() { return &image_; }
  // Problems met so far (bad mappings), each reported once.
  std::vector<std::string> TakeWarnings();
  // Binaries mapped so far that are not on this machine (their code cannot be decoded).
  const MissingBinaries& missing_binaries() const { return missing_; }
  // Changes applied so far (tests).
  size_t applied() const { return next_change_; }
  // The time of the next change not applied yet; UINT64_MAX: none (or ApplyAll).
  uint64_t next_change_ns() const {
    return std::min(next_change_ < changes_.size() ? changes_[next_change_].time_ns : UINT64_MAX,
                    next_code_ < code_.size() ? code_[next_code_].time_ns : UINT64_MAX);
  }
  // Grows whenever the image's contents change (rebuilds, applied changes).
  uint64_t generation() const { return generation_; }

 private:
  void Reset();
  void Apply(const MapChange& change);
  void AddFixed();
  void Add(const Mapping& mapping);

  ProcessImage image_;
  std::vector<MapChange> changes_;
  std::vector<Mapping> fixed_;
  std::string perf_map_;
  size_t next_change_ = 0;
  std::vector<TimedCode> code_;  // by time
  size_t next_code_ = 0;
  uint64_t generation_ = 0;
  uint64_t applied_time_ = 0;
  bool started_ = false;
  absl::flat_hash_set<std::string> warned_;
  std::vector<std::string> warnings_;
  MissingBinaries missing_;
};

// The decoder's code-bearing view of a sideband mapping: executable, backed by a real
// file (not "[vdso]", "//anon" ...). Converted to an image::Mapping.
bool IsCodeFileMapping(const ptd::Mapping& mapping);
Mapping FromSidebandMapping(const ptd::Mapping& mapping);
// A meta.json `images[]` entry (vDSO or memory dump, file) as a mapping; its path is
// resolved inside `trace_dir`.
Mapping FromImageEntry(const std::string& trace_dir, const ImageEntry& entry);

// The image of process `pid` of a trace directory: the sideband's map changes for it,
// meta.json's images for it (or for every process), images/perf-PID.map if present, and
// the JIT code of images/jit-PID.dump (the runtime's jitdump) and
// images/jit-capture-PID.dump (what an emulator captured), placed in time by
// PlaceJitCode.
// A mapping without a build-id gets the one meta.json `build_ids` noted for its file.
// `sideband` may be null. Nothing is applied yet: call AdvanceTo or ApplyAll.
std::unique_ptr<TimedProcessImage> MakeTraceProcessImage(SectionCache* sections, ModuleCache* modules,
                                                         const std::string& trace_dir,
                                                         const TraceMeta& meta,
                                                         const Sideband* sideband, int pid);

// The timed code of a jitdump's loads and moves (`file`: the dump's bytes). A load is
// placed at its own time only where earlier code of the same dump lay with other bytes
// (reuse of an address): elsewhere the range held
// no code before, so the load is placed as early as is safe: at `floor_ns` (the time the
// runtime announced the dump, or its process's exec) or the last exec before it. This
// keeps code that runs right after being written from decoding before its load when
// timing packets are sparse. `to_trace_time` maps the dump's timestamps onto the trace's
// clock; nullopt: another clock (loads keep their order; reuse cannot be placed: a
// warning says so). `exec_times`: the process's execs, in order.
std::vector<TimedCode> PlaceJitCode(const JitDump& dump, absl::Span<const uint8_t> file, const std::string& path,
                                    const std::string& name,
                                    const std::function<std::optional<uint64_t>(uint64_t)>& to_trace_time,
                                    uint64_t floor_ns, const std::vector<uint64_t>& exec_times,
                                    std::vector<std::string>* warnings);

}  // namespace ptd::image
