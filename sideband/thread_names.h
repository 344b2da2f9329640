#pragma once
// Threads of the recording: tid → pid, names over time (COMM), fork parents, exits.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sideband/mapping.h"

namespace ptd {

struct ThreadName {
  uint64_t time_ns = 0;  // from when the name holds
  std::string name;
  bool exec = false;     // set by exec (COMM_EXEC), not prctl/pthread_setname_np
};

struct ThreadInfo {
  int tid = -1;
  int pid = -1;
  int parent_tid = -1;  // FORK ptid, -1 when the thread existed before the recording
  int parent_pid = -1;  // FORK ppid
  uint64_t start_ns = 0;       // FORK time, 0 when unknown
  uint64_t exit_ns = kForever;  // EXIT time
  std::vector<ThreadName> names;  // in time order
};

class ThreadTable {
 public:
  // Events, in time order.
  void OnComm(int pid, int tid, const std::string& name, bool exec, uint64_t time_ns);
  void OnFork(int pid, int ppid, int tid, int ptid, uint64_t time_ns);
  void OnExit(int pid, int tid, uint64_t time_ns);
  // Any record that names a thread (sample_id, MMAP pid/tid): makes the thread known.
  void OnSeen(int pid, int tid);

  const ThreadInfo* Find(int tid) const;
  // Name of `tid` at `time_ns` (the earliest name when time_ns precedes all), "" if none.
  std::string NameAt(int tid, uint64_t time_ns) const;
  // Latest name, "" if none.
  std::string LastName(int tid) const;
  // pid of `tid`, -1 when unknown.
  int PidOf(int tid) const;
  // True while some known thread of `pid` has not exited.
  bool AnyThreadAlive(int pid) const;
  // All threads, sorted by tid.
  std::vector<ThreadInfo> Threads() const;

 private:
  ThreadInfo& Get(int pid, int tid);
  std::map<int, ThreadInfo> threads_;
};

}  // namespace ptd
