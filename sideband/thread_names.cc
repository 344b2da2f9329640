#include "sideband/thread_names.h"

namespace ptd {

ThreadInfo& ThreadTable::Get(int pid, int tid) {
  ThreadInfo& info = threads_[tid];
  info.tid = tid;
  if (pid >= 0) info.pid = pid;
  return info;
}

void ThreadTable::OnComm(int pid, int tid, const std::string& name, bool exec,
                         uint64_t time_ns) {
  ThreadInfo& info = Get(pid, tid);
  if (!info.names.empty() && info.names.back().name == name && !exec) return;
  info.names.push_back(ThreadName{time_ns, name, exec});
}

void ThreadTable::OnFork(int pid, int ppid, int tid, int ptid, uint64_t time_ns) {
  // A tid seen again after its exit is a new thread that reuses the number.
  if (auto it = threads_.find(tid); it != threads_.end() && it->second.exit_ns != kForever) {
    threads_.erase(it);
  }
  // The kernel writes no COMM on fork: the child starts with its parent's name.
  std::string parent_name = NameAt(ptid, time_ns);
  ThreadInfo& info = Get(pid, tid);
  info.parent_tid = ptid;
  info.parent_pid = ppid;
  info.start_ns = time_ns;
  if (info.names.empty() && !parent_name.empty()) {
    info.names.push_back(ThreadName{time_ns, parent_name, false});
  }
}

void ThreadTable::OnExit(int pid, int tid, uint64_t time_ns) {
  Get(pid, tid).exit_ns = time_ns;
}

void ThreadTable::OnSeen(int pid, int tid) {
  if (tid <= 0) return;  // the idle task, or no thread
  auto it = threads_.find(tid);
  if (it == threads_.end() || it->second.pid < 0) Get(pid, tid);
}

const ThreadInfo* ThreadTable::Find(int tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? nullptr : &it->second;
}

std::string ThreadTable::NameAt(int tid, uint64_t time_ns) const {
  const ThreadInfo* info = Find(tid);
  if (info == nullptr || info->names.empty()) return "";
  const ThreadName* best = &info->names.front();
  for (const ThreadName& name : info->names) {
    if (name.time_ns <= time_ns) best = &name;
  }
  return best->name;
}

std::string ThreadTable::LastName(int tid) const {
  const ThreadInfo* info = Find(tid);
  return info == nullptr || info->names.empty() ? "" : info->names.back().name;
}

int ThreadTable::PidOf(int tid) const {
  const ThreadInfo* info = Find(tid);
  return info == nullptr ? -1 : info->pid;
}

bool ThreadTable::AnyThreadAlive(int pid) const {
  for (const auto& [tid, info] : threads_) {
    if (info.pid == pid && info.exit_ns == kForever) return true;
  }
  return false;
}

std::vector<ThreadInfo> ThreadTable::Threads() const {
  std::vector<ThreadInfo> result;
  for (const auto& [tid, info] : threads_) result.push_back(info);
  return result;
}

}  // namespace ptd
