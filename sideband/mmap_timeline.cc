#include "sideband/mmap_timeline.h"

#include <algorithm>
#include <set>

namespace ptd {
namespace {

const std::vector<Mapping> kNoMappings;
const std::vector<MapChange> kNoChanges;

bool LiveAt(const Mapping& m, uint64_t time_ns) {
  return m.begin_ns <= time_ns && time_ns < m.end_ns;
}

}  // namespace

MmapTimeline::Process& MmapTimeline::GetProcess(int pid) { return processes_[pid]; }

void MmapTimeline::EndAll(Process& process, uint64_t time_ns) {
  for (size_t index : process.live) process.mappings[index].end_ns = time_ns;
  process.live.clear();
}

void MmapTimeline::AddMapping(int pid, const Mapping& mapping, uint64_t time_ns) {
  Process& process = GetProcess(pid);
  Mapping added = mapping;
  added.begin_ns = time_ns;
  added.end_ns = kForever;
  if (added.end < added.start) added.end = kForever;  // addr + len wrapped around
  // Like munmap of the covered range followed by mmap: older mappings overlapping the new
  // one end now, and the parts of them outside the new range continue as new pieces.
  std::vector<size_t> still_live;
  std::vector<Mapping> pieces;
  for (size_t index : process.live) {
    Mapping& old = process.mappings[index];
    if (old.end <= added.start || added.end <= old.start || added.start == added.end) {
      still_live.push_back(index);
      continue;
    }
    old.end_ns = time_ns;
    if (old.start < added.start) {
      Mapping left = old;
      left.end = added.start;
      left.begin_ns = time_ns;
      left.end_ns = kForever;
      pieces.push_back(left);
    }
    if (added.end < old.end) {
      Mapping right = old;
      right.start = added.end;
      right.pgoff = old.pgoff + (added.end - old.start);
      right.begin_ns = time_ns;
      right.end_ns = kForever;
      pieces.push_back(right);
    }
  }
  process.live = std::move(still_live);
  for (const Mapping& piece : pieces) {
    process.live.push_back(process.mappings.size());
    process.mappings.push_back(piece);
  }
  AddLive(process, added, time_ns, /*inherited=*/false);
}

void MmapTimeline::AddLive(Process& process, const Mapping& mapping, uint64_t time_ns, bool inherited) {
  process.live.push_back(process.mappings.size());
  process.mappings.push_back(mapping);
  MapChange change;
  change.kind = MapChange::Kind::kMap;
  change.time_ns = time_ns;
  change.mapping = mapping;
  change.inherited = inherited;
  process.changes.push_back(std::move(change));
}

void MmapTimeline::Fork(int parent_pid, int child_pid, uint64_t time_ns) {
  if (parent_pid == child_pid) return;  // a new thread shares its process's maps
  std::vector<Mapping> inherited;
  if (auto it = processes_.find(parent_pid); it != processes_.end()) {
    for (size_t index : it->second.live) inherited.push_back(it->second.mappings[index]);
  }
  Process& child = GetProcess(child_pid);
  EndAll(child, time_ns);  // a reused pid: the old process is gone
  MapChange fork;
  fork.kind = MapChange::Kind::kFork;
  fork.time_ns = time_ns;
  fork.parent_pid = parent_pid;
  child.changes.push_back(fork);
  for (Mapping& mapping : inherited) {
    mapping.begin_ns = time_ns;
    mapping.end_ns = kForever;
    AddLive(child, mapping, time_ns, /*inherited=*/true);
  }
}

void MmapTimeline::Exec(int pid, uint64_t time_ns, std::string program) {
  EndAllMappings(pid, time_ns, MapChange::Kind::kExec).program = std::move(program);
}

void MmapTimeline::Exit(int pid, uint64_t time_ns) { EndAllMappings(pid, time_ns, MapChange::Kind::kExit); }

MapChange& MmapTimeline::EndAllMappings(int pid, uint64_t time_ns, MapChange::Kind why) {
  Process& process = GetProcess(pid);
  EndAll(process, time_ns);
  MapChange& change = process.changes.emplace_back();
  change.kind = why;
  change.time_ns = time_ns;
  return change;
}

const Mapping* MmapTimeline::Find(int pid, uint64_t address, uint64_t time_ns) const {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return nullptr;
  const std::vector<Mapping>& mappings = it->second.mappings;
  // Newest first: at one time mappings don't overlap, and the newest is the likeliest hit.
  for (auto m = mappings.rbegin(); m != mappings.rend(); ++m) {
    if (m->start <= address && address < m->end && LiveAt(*m, time_ns)) return &*m;
  }
  return nullptr;
}

std::vector<Mapping> MmapTimeline::MappingsAt(int pid, uint64_t time_ns) const {
  std::vector<Mapping> result;
  auto it = processes_.find(pid);
  if (it == processes_.end()) return result;
  for (const Mapping& m : it->second.mappings) {
    if (LiveAt(m, time_ns)) result.push_back(m);
  }
  std::sort(result.begin(), result.end(),
            [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  return result;
}

const std::vector<Mapping>& MmapTimeline::AllMappings(int pid) const {
  auto it = processes_.find(pid);
  return it == processes_.end() ? kNoMappings : it->second.mappings;
}

const std::vector<MapChange>& MmapTimeline::Changes(int pid) const {
  auto it = processes_.find(pid);
  return it == processes_.end() ? kNoChanges : it->second.changes;
}

std::vector<std::string> MmapTimeline::MappedFiles() const {
  std::set<std::string> paths;
  for (const auto& [pid, process] : processes_) {
    for (const Mapping& m : process.mappings) {
      if (!m.path.empty()) paths.insert(m.path);
    }
  }
  return {paths.begin(), paths.end()};
}

std::vector<int> MmapTimeline::Pids() const {
  std::vector<int> pids;
  for (const auto& [pid, process] : processes_) pids.push_back(pid);
  return pids;
}

}  // namespace ptd
