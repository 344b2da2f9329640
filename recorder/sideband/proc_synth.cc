#include "recorder/sideband/proc_synth.h"

#include <dirent.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "sideband/record_builder.h"

namespace ptd {

absl::StatusOr<std::vector<int>> ListThreads(int pid) {
  std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = ::opendir(task_dir.c_str());
  if (dir == nullptr) return ErrnoError("cannot list threads in", task_dir, errno);
  std::vector<int> tids;
  while (struct dirent* entry = ::readdir(dir)) {
    int tid;
    if (absl::SimpleAtoi(entry->d_name, &tid)) tids.push_back(tid);
  }
  ::closedir(dir);
  std::sort(tids.begin(), tids.end());
  if (tids.empty()) return absl::NotFoundError(absl::StrCat(task_dir, ": no threads"));
  return tids;
}

absl::StatusOr<std::vector<ThreadComm>> ReadThreadComms(int pid) {
  absl::StatusOr<std::vector<int>> tids = ListThreads(pid);
  if (!tids.ok()) return tids.status();
  std::vector<ThreadComm> threads;
  for (int tid : *tids) {
    absl::StatusOr<std::string> comm =
        ReadFileToString(absl::StrCat("/proc/", pid, "/task/", tid, "/comm"));
    if (!comm.ok()) continue;  // the thread ended between listing and reading
    std::string name = *comm;
    if (!name.empty() && name.back() == '\n') name.pop_back();
    threads.push_back({tid, std::move(name)});
  }
  if (threads.empty()) return absl::NotFoundError(absl::StrCat("/proc/", pid, "/task: no threads"));
  return threads;
}

SynthesizedSideband SynthesizeRecords(int pid, const std::vector<ProcMapping>& mappings,
                                      const std::vector<ThreadComm>& threads,
                                      const ProcSynthOptions& options) {
  SynthesizedSideband out;
  out.mappings = mappings;
  out.threads = threads;
  RecordBuilder builder(options.format);
  const uint32_t upid = static_cast<uint32_t>(pid);
  auto sample_id = [&](uint32_t tid) {
    SampleId id;
    id.pid = upid;
    id.tid = tid;
    id.time = options.time_ns;
    id.cpu = options.cpu;
    id.id = options.id;
    return id;
  };
  // perf's order: the process's name, its mappings, then each other thread.
  auto main_thread = std::find_if(threads.begin(), threads.end(),
                                  [pid](const ThreadComm& t) { return t.tid == pid; });
  if (main_thread != threads.end()) {
    builder.Append(CommRecord{upid, upid, main_thread->comm, false}, sample_id(upid));
    out.comm_records++;
  }
  for (const ProcMapping& m : mappings) {
    if (!m.executable()) continue;
    Mmap2Record r;
    r.pid = upid;
    r.tid = upid;
    r.addr = m.start;
    r.len = m.end - m.start;
    r.pgoff = m.pgoff;
    r.maj = m.dev_major;
    r.min = m.dev_minor;
    r.ino = m.inode;
    r.prot = m.prot;
    r.flags = m.flags;
    // The kernel names anonymous executable memory "//anon" in MMAP records.
    r.filename = m.anonymous() ? "//anon" : m.path;
    builder.Append(std::move(r), sample_id(upid));
    out.mmap_records++;
  }
  for (const ThreadComm& t : threads) {
    if (t.tid == pid) continue;
    const uint32_t tid = static_cast<uint32_t>(t.tid);
    builder.Append(ForkRecord{upid, upid, tid, upid, options.time_ns}, sample_id(tid));
    out.fork_records++;
    builder.Append(CommRecord{upid, tid, t.comm, false}, sample_id(tid));
    out.comm_records++;
  }
  out.bytes = builder.Take();
  return out;
}

absl::StatusOr<SynthesizedSideband> SynthesizeProcess(int pid, const ProcSynthOptions& options) {
  absl::StatusOr<std::vector<ThreadComm>> threads = ReadThreadComms(pid);
  if (!threads.ok()) return threads.status();
  absl::StatusOr<std::vector<ProcMapping>> maps = ReadProcMaps(pid);
  if (!maps.ok()) return maps.status();
  return SynthesizeRecords(pid, *maps, *threads, options);
}

}  // namespace ptd
