#include "image/timed_image.h"

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
      if (!IsCodeFileMapping(change.mapping)) return;
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
      image_.Clear();
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
  while (next_change_ < changes_.size() && changes_[next_change_].time_ns <= time_ns) {
    Apply(changes_[next_change_++]);
    ++generation_;
  }
}

void TimedProcessImage::ApplyAll() {
  Reset();
  for (; next_change_ < changes_.size(); ++next_change_) {
    if (changes_[next_change_].kind == MapChange::Kind::kMap) Apply(changes_[next_change_]);
  }
  AddFixed();
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
  auto image = std::make_unique<TimedProcessImage>(sections, modules, absl::StrCat("pid ", pid),
                                                   std::move(changes), std::move(fixed), std::move(perf_map));
  std::vector<std::string> problems;
  std::map<std::string, std::string> archive = UsableArchive(trace_dir, meta, &problems);
  image->SetArchive(std::move(archive), meta.archived, std::move(problems));
  if (!meta.kernel.kallsyms.empty()) image->AddKallsyms(ResolveTracePath(trace_dir, meta.kernel.kallsyms));
  return image;
}

}  // namespace ptd::image
