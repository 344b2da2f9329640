#include "image/timed_image.h"

#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/elf_build_id.h"
#include "common/file_util.h"
#include "common/trace_dir.h"

namespace ptd::image {

bool IsCodeFileMapping(const ptd::Mapping& m) {
  return m.executable && !m.path.empty() && m.path[0] != '[' && !absl::StartsWith(m.path, "//");
}

Mapping FromSidebandMapping(const ptd::Mapping& m) {
  Mapping mapping;
  mapping.path = m.path;
  mapping.name = m.path;
  mapping.vaddr = m.start;
  mapping.file_offset = m.pgoff;
  mapping.size = m.end - m.start;
  mapping.build_id = m.build_id;
  return mapping;
}

TimedProcessImage::TimedProcessImage(SectionCache* sections, ModuleCache* modules, std::string name,
                                     std::vector<MapChange> changes, std::vector<Mapping> fixed,
                                     std::string perf_map)
    : image_(sections, modules, std::move(name)),
      changes_(std::move(changes)),
      fixed_(std::move(fixed)),
      perf_map_(std::move(perf_map)) {}

void TimedProcessImage::SetArchive(std::map<std::string, std::string> by_build_id, bool archived,
                                   std::vector<std::string> problems) {
  archive_ = std::move(by_build_id);
  archived_ = archived;
  for (std::string& p : problems) Warn(std::move(p));
}

void TimedProcessImage::AddKallsyms(const std::string& path) {
  if (absl::Status s = image_.AddKallsyms(path); !s.ok()) Warn(std::string(s.message()));
}

void TimedProcessImage::AddTimedCode(std::vector<TimedCode> code) {
  code_.insert(code_.end(), std::make_move_iterator(code.begin()), std::make_move_iterator(code.end()));
  std::stable_sort(code_.begin(), code_.end(),
                   [](const TimedCode& a, const TimedCode& b) { return a.time_ns < b.time_ns; });
}

void TimedProcessImage::Warn(std::string warning) {
  if (warned_.insert(warning).second) warnings_.push_back(std::move(warning));
}

std::vector<std::string> TimedProcessImage::TakeWarnings() {
  for (const std::string& w : image_.warnings()) Warn(w);
  std::vector<std::string> out;
  out.swap(warnings_);
  return out;
}

void TimedProcessImage::Add(const Mapping& mapping) {
  absl::Status s = image_.AddMapping(mapping);
  if (!s.ok()) Warn(std::string(s.message()));
}

void TimedProcessImage::AddFixed() {
  for (const Mapping& m : fixed_) Add(m);
}

void TimedProcessImage::Reset() {
  image_.Clear();
  ++generation_;
  next_change_ = 0;
  next_code_ = 0;
  started_ = true;
  applied_time_ = 0;
  AddFixed();
  if (!perf_map_.empty()) {
    absl::Status s = image_.AddPerfMap(perf_map_);
    if (!s.ok()) Warn(std::string(s.message()));
  }
}

void TimedProcessImage::Apply(const MapChange& change) {
  switch (change.kind) {
    case MapChange::Kind::kMap: {
      // A runtime maps its jitdump executable so that perf records it; it holds no code.
      if (!IsCodeFileMapping(change.mapping) || IsJitDumpName(change.mapping.path)) return;
      if (auto copy = archive_.find(change.mapping.build_id);
          !change.mapping.build_id.empty() && copy != archive_.end()) {
        Mapping mapping = FromSidebandMapping(change.mapping);
        mapping.path = copy->second;
        Add(mapping);
        return;
      }
      if (archived_ && PathExists(change.mapping.path)) {
        Warn(absl::StrFormat("%s is not archived in the trace: decoding it from the file at that path",
                             change.mapping.path));
      }
      if (!PathExists(change.mapping.path)) {
        missing_.Add({change.mapping.path, change.mapping.build_id, change.mapping.end - change.mapping.start});
        return;
      }
      Add(FromSidebandMapping(change.mapping));
      return;
    }
    case MapChange::Kind::kExec:
      image_.Exec(ProgramStart{change.time_ns, change.program});
      AddFixed();
      return;
    case MapChange::Kind::kFork:  // the copied mappings follow as kMap
    case MapChange::Kind::kExit:
      return;
  }
}

void TimedProcessImage::AdvanceTo(uint64_t time_ns) {
  if (!started_ || time_ns < applied_time_) Reset();
  applied_time_ = time_ns;
  for (;;) {
    const bool change = next_change_ < changes_.size() && changes_[next_change_].time_ns <= time_ns;
    const bool code = next_code_ < code_.size() && code_[next_code_].time_ns <= time_ns;
    if (!change && !code) break;
    // The sideband's changes first on a tie: code placed at an exec comes after it.
    if (change && (!code || changes_[next_change_].time_ns <= code_[next_code_].time_ns)) {
      Apply(changes_[next_change_++]);
    } else {
      Add(code_[next_code_++].mapping);
    }
    ++generation_;
  }
}

void TimedProcessImage::ApplyAll() {
  Reset();
  for (; next_change_ < changes_.size(); ++next_change_) {
    if (changes_[next_change_].kind == MapChange::Kind::kMap) Apply(changes_[next_change_]);
  }
  AddFixed();
  for (; next_code_ < code_.size(); ++next_code_) Add(code_[next_code_].mapping);
  ++generation_;
}

Mapping FromImageEntry(const std::string& trace_dir, const ImageEntry& entry) {
  Mapping mapping;
  mapping.path = ResolveTracePath(trace_dir, entry.path);
  mapping.name = entry.name.empty() ? entry.path : entry.name;
  mapping.vaddr = entry.vaddr;
  mapping.file_offset = entry.file_offset;
  mapping.size = entry.size;
  mapping.build_id = entry.build_id;
  mapping.memory_dump = entry.kind == ImageKind::kMemoryDump;
  return mapping;
}

std::vector<TimedCode> PlaceJitCode(const JitDump& dump, absl::Span<const uint8_t> file, const std::string& path,
                                    const std::string& name,
                                    const std::function<std::optional<uint64_t>(uint64_t)>& to_trace_time,
                                    uint64_t floor_ns, const std::vector<uint64_t>& exec_times,
                                    std::vector<std::string>* warnings) {
  struct Piece {
    uint64_t end;
    uint64_t offset;  // of the piece's first byte in `file`
  };
  std::vector<TimedCode> out;
  std::map<uint64_t, Piece> current;  // the dump's code as it stands: start → piece, disjoint
  uint64_t unplaced_reuse = 0;
  for (const JitCodeEvent& event : dump.code) {
    const uint64_t start = event.code_addr, end = event.code_addr + event.code_size;
    if (event.code_size == 0 || end < start || event.code_offset + event.code_size > file.size()) continue;
    // Reuse: earlier code of the dump lay here with other bytes (identical bytes, e.g. a
    // capture of a block inside one captured before, change nothing).
    bool reused = false;
    auto it = current.lower_bound(start);
    if (it != current.begin() && std::prev(it)->second.end > start) --it;
    std::vector<std::pair<uint64_t, Piece>> kept;
    while (it != current.end() && it->first < end) {
      const uint64_t a = std::max(start, it->first), b = std::min(end, it->second.end);
      reused |= std::memcmp(file.data() + it->second.offset + (a - it->first),
                            file.data() + event.code_offset + (a - start), b - a) != 0;
      if (it->first < start) kept.push_back({it->first, Piece{start, it->second.offset}});
      if (it->second.end > end) {
        kept.push_back({end, Piece{it->second.end, it->second.offset + (end - it->first)}});
      }
      it = current.erase(it);
    }
    for (auto& piece : kept) current.insert(piece);
    current[start] = Piece{end, event.code_offset};

    std::optional<uint64_t> time = to_trace_time(event.timestamp);
    TimedCode code;
    code.time_ns = floor_ns;
    if (time) {
      auto exec = std::upper_bound(exec_times.begin(), exec_times.end(), *time);
      if (exec != exec_times.begin()) code.time_ns = std::max(code.time_ns, *std::prev(exec));
      if (reused) code.time_ns = std::max(code.time_ns, *time);
    } else if (reused) {
      ++unplaced_reuse;
    }
    code.mapping.path = path;
    code.mapping.name = name;
    code.mapping.vaddr = start;
    code.mapping.file_offset = event.code_offset;
    code.mapping.size = event.code_size;
    code.mapping.memory_dump = true;
    code.mapping.function = event.name;
    out.push_back(std::move(code));
  }
  if (unplaced_reuse > 0 && warnings != nullptr) {
    warnings->push_back(absl::StrFormat(
        "%s: its times are on another clock than the trace's, so %d loads at addresses that earlier code used "
        "cannot be placed in time: the last code loaded at an address is decoded throughout",
        path, unplaced_reuse));
  }
  return out;
}

namespace {

// The archive's copies that are what meta.json says (size, build-id), by build-id; the
// others become `problems`, and decode reads their paths.
std::map<std::string, std::string> UsableArchive(const std::string& trace_dir, const TraceMeta& meta,
                                                 std::vector<std::string>* problems) {
  std::map<std::string, std::string> usable;
  for (const ArchivedFile& f : meta.archive) {
    if (usable.count(f.build_id)) continue;
    const std::string file = ResolveTracePath(trace_dir, f.file);
    std::string problem;
    absl::StatusOr<std::string> id = ReadElfBuildId(file);
    if (!id.ok()) {
      problem = std::string(id.status().message());
    } else if (*id != f.build_id) {
      problem = absl::StrFormat("%s: build-id %s, expected %s", f.file, id->empty() ? "none" : *id, f.build_id);
    } else if (int64_t size = FileSize(file); f.size != 0 && size != static_cast<int64_t>(f.size)) {
      problem = absl::StrFormat("%s: %d bytes, expected %u (truncated?)", f.file, size, f.size);
    }
    if (problem.empty()) {
      usable[f.build_id] = file;
    } else {
      problems->push_back(absl::StrFormat("archived copy of %s is damaged (%s): decoding it from the file at that path",
                                          f.path, problem));
    }
  }
  return usable;
}

// The jitdump's clock on the trace's: the emulators' wall axis and the dumps' default
// are both CLOCK_MONOTONIC; hardware traces convert TSC stamps (JITDUMP_FLAGS_ARCH_TIMESTAMP)
// as the PT packets' own. Anything else (the virtual axis) cannot be compared.
std::function<std::optional<uint64_t>(uint64_t)> JitClock(const TraceMeta& meta, bool arch_timestamp) {
  const bool wall = meta.time_axis == "wall";
  const bool tsc = meta.time_axis == "tsc" || (meta.time_axis.empty() && meta.mode == TraceMode::kHardware);
  if (wall && !arch_timestamp) return [](uint64_t t) { return std::optional<uint64_t>(t); };
  if (tsc && arch_timestamp) {
    TimeConversion conversion = meta.time;
    return [conversion](uint64_t t) { return std::optional<uint64_t>(conversion.TscToNs(t)); };
  }
  return [](uint64_t) { return std::optional<uint64_t>(); };
}

// Names captured code (which has none) after the runtime's load of the same bytes at
// the same place, the one placed last at or before the capture, and gives it the load's
// whole range as its function.
void NameCapturedCode(const std::vector<TimedCode>& loads, absl::Span<const uint8_t> load_file,
                      absl::Span<const uint8_t> capture_file, std::vector<TimedCode>* captured) {
  for (TimedCode& code : *captured) {
    Mapping& m = code.mapping;
    const TimedCode* best = nullptr;
    for (const TimedCode& load : loads) {
      const Mapping& l = load.mapping;
      if (m.vaddr < l.vaddr || m.vaddr + m.size > l.vaddr + l.size) continue;
      if (std::memcmp(load_file.data() + l.file_offset + (m.vaddr - l.vaddr), capture_file.data() + m.file_offset,
                      m.size) != 0) {
        continue;
      }
      if (best == nullptr || load.time_ns <= code.time_ns) best = &load;
    }
    if (best == nullptr) continue;
    m.function = best->mapping.function;
    m.function_start = best->mapping.vaddr;
    m.function_end = best->mapping.vaddr + best->mapping.size;
  }
}

// The JIT code of `pid` from the trace directory's jitdumps: the runtime's, and the
// emulator's capture, whose stamps are on the trace's own clock.
void AddJitCode(const std::string& trace_dir, const TraceMeta& meta, const std::vector<MapChange>& changes,
                int pid, TimedProcessImage* image) {
  std::vector<uint64_t> exec_times;
  uint64_t announced = 0;
  for (const MapChange& change : changes) {
    if (change.kind == MapChange::Kind::kExec) exec_times.push_back(change.time_ns);
    if (change.kind == MapChange::Kind::kMap && IsJitDumpName(change.mapping.path) && announced == 0) {
      announced = change.time_ns;
    }
  }
  const uint64_t last_exec = exec_times.empty() ? 0 : exec_times.back();
  std::vector<uint8_t> files[2];
  std::vector<TimedCode> placed[2];
  std::vector<std::string> placement_warnings[2];
  for (int i = 0; i < 2; ++i) {
    const bool capture = i == 1;
    const std::string path = ResolveTracePath(
        trace_dir, absl::StrCat(kImagesSubdir, capture ? "/jit-capture-" : "/jit-", pid, ".dump"));
    if (!PathExists(path)) continue;
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
    absl::StatusOr<JitDump> dump = bytes.ok() ? ParseJitDump(*bytes, path) : absl::StatusOr<JitDump>(bytes.status());
    if (!dump.ok()) {
      image->Warn(absl::StrCat(dump.status().message(), ": its JIT code is not decoded"));
      continue;
    }
    files[i] = std::move(*bytes);
    for (std::string& w : dump->warnings) image->Warn(std::move(w));
    std::function<std::optional<uint64_t>(uint64_t)> clock =
        capture ? [](uint64_t t) { return std::optional<uint64_t>(t); } : JitClock(meta, dump->arch_timestamp);
    // Stamps on another clock: from the announcement (the dump's mmap), else the last exec.
    const uint64_t floor_ns = clock(dump->timestamp).has_value() ? 0 : (announced != 0 ? announced : last_exec);
    placed[i] = PlaceJitCode(*dump, files[i], path, "[jit]", clock, floor_ns, exec_times, &placement_warnings[i]);
  }
  // Placement matters only for the code decoded: the capture's when there is one.
  for (std::string& w : placement_warnings[files[1].empty() ? 0 : 1]) image->Warn(std::move(w));
  if (files[1].empty()) {
    image->AddTimedCode(std::move(placed[0]));
    return;
  }
  // An emulator captured every piece of JIT code that ran, on the trace's own clock:
  // the runtime's dump only names it (its own times may not even be comparable).
  NameCapturedCode(placed[0], files[0], files[1], &placed[1]);
  image->AddTimedCode(std::move(placed[1]));
}

}  // namespace

std::unique_ptr<TimedProcessImage> MakeTraceProcessImage(SectionCache* sections, ModuleCache* modules,
                                                         const std::string& trace_dir,
                                                         const TraceMeta& meta,
                                                         const Sideband* sideband, int pid) {
  std::vector<MapChange> changes;
  if (sideband != nullptr) changes = sideband->mmaps.Changes(pid);
  for (MapChange& change : changes) {
    if (change.kind != MapChange::Kind::kMap || !change.mapping.build_id.empty()) continue;
    auto recorded = meta.build_ids.find(change.mapping.path);
    if (recorded != meta.build_ids.end()) change.mapping.build_id = recorded->second;
  }
  std::vector<Mapping> fixed;
  for (const ImageEntry& entry : meta.images) {
    if (entry.pid != -1 && entry.pid != pid) continue;
    fixed.push_back(FromImageEntry(trace_dir, entry));
  }
  std::string perf_map = ResolveTracePath(trace_dir, absl::StrCat(kImagesSubdir, "/perf-", pid, ".map"));
  if (!PathExists(perf_map)) perf_map.clear();
  auto image = std::make_unique<TimedProcessImage>(sections, modules, absl::StrCat("pid ", pid), changes,
                                                   std::move(fixed), std::move(perf_map));
  AddJitCode(trace_dir, meta, changes, pid, image.get());
  std::vector<std::string> problems;
  std::map<std::string, std::string> archive = UsableArchive(trace_dir, meta, &problems);
  image->SetArchive(std::move(archive), meta.archived, std::move(problems));
  if (!meta.kernel.kallsyms.empty()) image->AddKallsyms(ResolveTracePath(trace_dir, meta.kernel.kallsyms));
  return image;
}

}  // namespace ptd::image
