#pragma once
// Per-process memory maps over time, built from MMAP/MMAP2, FORK, COMM(exec) and EXIT in
// time order. A new mapping that overlaps older ones cuts them, as the kernel's mmap
// does (MAP_FIXED over existing pages), so at any time a process's mappings don't overlap.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sideband/mapping.h"

namespace ptd {

// One change to a process's address space, in the order it happened.
struct MapChange {
  enum class Kind {
    kMap,     // `mapping` was added (overlapped parts of older ones end at time_ns)
    kFork,    // the process began as a copy of `parent_pid`'s maps
    kExec,    // every mapping ended (exec); the new image's maps follow as kMap
    kExit,    // every mapping ended (process exit)
  };
  Kind kind = Kind::kMap;
  uint64_t time_ns = 0;
  Mapping mapping;       // kMap only (begin_ns/end_ns as of insertion: end is kForever)
  int parent_pid = -1;   // kFork only
  // kMap only: copied from the parent by a fork (every copied mapping follows its kFork
  // as a kMap, so replaying kMap changes alone rebuilds the maps).
  bool inherited = false;
  std::string program;   // kExec only: the new program's name (the COMM the exec set)
};

class MmapTimeline {
 public:
  // Events, in time order.
  void AddMapping(int pid, const Mapping& mapping, uint64_t time_ns);
  // FORK: with child_pid == parent_pid (a new thread) nothing changes.
  void Fork(int parent_pid, int child_pid, uint64_t time_ns);
  // `program`: the new program's name (COMM).
  void Exec(int pid, uint64_t time_ns, std::string program = "");
  void Exit(int pid, uint64_t time_ns);

  // The mapping of `pid` covering `address` at `time_ns`, or nullptr. The pointer stays
  // valid until the next event is added.
  const Mapping* Find(int pid, uint64_t address, uint64_t time_ns) const;
  // Mappings of `pid` in place at `time_ns`, sorted by start address.
  std::vector<Mapping> MappingsAt(int pid, uint64_t time_ns) const;
  // Every mapping `pid` ever had, including ended ones and pieces of cut ones, in the
  // order they were created.
  const std::vector<Mapping>& AllMappings(int pid) const;
  // Changes to `pid`'s maps in order (empty for unknown pids).
  const std::vector<MapChange>& Changes(int pid) const;
  // Distinct paths of all mappings of all processes, sorted (for image loading).
  std::vector<std::string> MappedFiles() const;
  // Every pid seen, sorted.
  std::vector<int> Pids() const;

 private:
  struct Process {
    std::vector<Mapping> mappings;    // all, in creation order
    std::vector<size_t> live;         // indices into mappings with end_ns == kForever
    std::vector<MapChange> changes;
  };
  Process& GetProcess(int pid);
  void EndAll(Process& process, uint64_t time_ns);
  // `mapping` becomes live in `process`, and a kMap change says so.
  static void AddLive(Process& process, const Mapping& mapping, uint64_t time_ns, bool inherited);
  // Exec and exit: every mapping ends, and the change says which.
  MapChange& EndAllMappings(int pid, uint64_t time_ns, MapChange::Kind why);

  std::map<int, Process> processes_;
};

}  // namespace ptd
