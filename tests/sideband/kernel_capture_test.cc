// Real sideband bytes from this kernel: a PERF_COUNT_SW_DUMMY event with the recorder's
// sideband settings on a child the test forks, its DATA ring read once the child is done.
// Proves the parser and the timelines on what the kernel really writes (not a recorder:
// no wrap-around handling beyond one copy, no draining thread).
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sideband/record_reader.h"
#include "sideband/sideband_attr.h"
#include "sideband/sideband_set.h"

namespace ptd {
namespace {

constexpr size_t kDataPages = 64;

std::atomic<bool> thread_named{false};

void* ThreadBody(void*) {
  // Stay alive until named: naming a thread that already exited fails.
  while (!thread_named.load()) sched_yield();
  return nullptr;
}

// The child: waits for the go byte, maps its own executable PROT_EXEC at an address the
// kernel picks, reports it, renames itself, runs and names a thread, then execs
// /usr/bin/true.
[[noreturn]] void ChildMain(int go_fd, int report_fd) {
  char go;
  if (read(go_fd, &go, 1) != 1) _exit(10);
  int fd = open("/proc/self/exe", O_RDONLY);
  void* addr = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) _exit(11);
  uint64_t value = reinterpret_cast<uint64_t>(addr);
  if (write(report_fd, &value, sizeof value) != sizeof value) _exit(12);
  prctl(PR_SET_NAME, "sb-capture", 0, 0, 0);
  pthread_t thread;
  if (pthread_create(&thread, nullptr, ThreadBody, nullptr) != 0) _exit(13);
  // Named from the main thread: the event follows only the main thread (inherit and a
  // per-thread ring don't combine), and the kernel writes the COMM in the writer's context.
  pthread_setname_np(thread, "sb-thread");
  thread_named.store(true);
  pthread_join(thread, nullptr);
  char* argv[] = {const_cast<char*>("/usr/bin/true"), nullptr};
  execv(argv[0], argv);
  _exit(14);
}

// The DATA ring's records between data_tail and data_head, wrap-around undone.
std::vector<uint8_t> DrainRing(void* ring, size_t page) {
  auto* header = static_cast<perf_event_mmap_page*>(ring);
  const uint64_t head = __atomic_load_n(&header->data_head, __ATOMIC_ACQUIRE);
  const uint64_t tail = header->data_tail;
  const uint64_t size = header->data_size ? header->data_size : kDataPages * page;
  const uint64_t offset = header->data_offset ? header->data_offset : page;
  const uint8_t* data = static_cast<const uint8_t*>(ring) + offset;
  std::vector<uint8_t> bytes;
  for (uint64_t pos = tail; pos < head; ++pos) bytes.push_back(data[pos % size]);
  __atomic_store_n(&header->data_tail, head, __ATOMIC_RELEASE);
  return bytes;
}

TEST(KernelCaptureTest, ParsesRealDummyEventSidebandOfAForkedChild) {
  if (access("/usr/bin/true", X_OK) != 0) GTEST_SKIP() << "/usr/bin/true missing";
  int go[2], report[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(report), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Never outlive a test that failed or was killed.
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    close(go[1]);
    ChildMain(go[0], report[1]);
  }

  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                     PERF_SAMPLE_IDENTIFIER;
  SetSidebandRecordBits(/*context_switches=*/true, &attr);
  attr.exclude_kernel = 1;
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, child, -1, -1, 0));
  if (fd < 0) {
    int err = errno;
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    GTEST_SKIP() << "perf_event_open(dummy) failed: " << std::strerror(err);
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* ring = mmap(nullptr, (1 + kDataPages) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(ring, MAP_FAILED) << std::strerror(errno);

  ASSERT_EQ(write(go[1], "g", 1), 1);
  uint64_t mapped_at = 0;
  ASSERT_EQ(read(report[0], &mapped_at, sizeof mapped_at), 8);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  char exe[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", exe, sizeof exe - 1), 0);

  std::vector<uint8_t> bytes = DrainRing(ring, page);
  munmap(ring, (1 + kDataPages) * page);
  close(fd);
  for (int p : {go[0], go[1], report[0], report[1]}) close(p);

  absl::StatusOr<RecordList> list = ReadAllRecords(bytes, "kernel ring", RecordFormat{});
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_GT(list->records.size(), 0u);
  const uint32_t pid = static_cast<uint32_t>(child);
  bool saw_map = false, saw_name = false, saw_exec = false, saw_switch = false;
  bool saw_true_map = false;
  uint32_t thread_tid = 0;
  for (const PerfRecord& r : list->records) {
    EXPECT_TRUE(r.sample_id.has_time && r.sample_id.has_tid && r.sample_id.has_cpu)
        << PerfRecordTypeName(r.type);
    if (const auto* m = std::get_if<Mmap2Record>(&r.body)) {
      if (m->addr == mapped_at) {
        saw_map = true;
        EXPECT_EQ(m->pid, pid);
        EXPECT_EQ(m->filename, exe);
        EXPECT_EQ(m->pgoff, 0u);
        EXPECT_EQ(m->len, 4096u);
        EXPECT_EQ(m->prot, static_cast<uint32_t>(PROT_READ | PROT_EXEC));
      }
      if (m->filename == "/usr/bin/true") saw_true_map = true;
    } else if (const auto* c = std::get_if<CommRecord>(&r.body)) {
      if (c->comm == "sb-capture" && c->tid == pid) saw_name = true;
      if (c->comm == "true" && c->exec) saw_exec = true;
    } else if (const auto* f = std::get_if<ForkRecord>(&r.body)) {
      if (f->pid == pid && f->ppid == pid && f->tid != pid) thread_tid = f->tid;
    } else if (std::holds_alternative<SwitchRecord>(r.body)) {
      if (r.sample_id.pid == pid) saw_switch = true;
    }
  }
  EXPECT_TRUE(saw_map) << "no MMAP2 at 0x" << std::hex << mapped_at;
  EXPECT_TRUE(saw_name);
  EXPECT_TRUE(saw_exec);
  EXPECT_TRUE(saw_true_map);
  EXPECT_TRUE(saw_switch);
  EXPECT_NE(thread_tid, 0u) << "no FORK record for the thread";

  // The same records through the timelines.
  SidebandSource source;
  source.info.file = "kernel ring";
  source.records = list->records;
  Sideband sb = BuildSideband({std::move(source)});
  const int ipid = child;
  uint64_t map_time = 0, exec_time = 0;
  for (const MapChange& change : sb.mmaps.Changes(ipid)) {
    if (change.kind == MapChange::Kind::kMap && change.mapping.start == mapped_at)
      map_time = change.time_ns;
    if (change.kind == MapChange::Kind::kExec) exec_time = change.time_ns;
  }
  ASSERT_GT(map_time, 0u);
  ASSERT_GT(exec_time, map_time);
  const Mapping* found = sb.mmaps.Find(ipid, mapped_at + 100, map_time);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->path, exe);
  EXPECT_EQ(sb.mmaps.Find(ipid, mapped_at + 100, exec_time), nullptr);  // exec reset
  EXPECT_EQ(sb.threads.LastName(static_cast<int>(thread_tid)), "sb-thread");
  EXPECT_EQ(sb.threads.PidOf(static_cast<int>(thread_tid)), ipid);
  EXPECT_EQ(sb.threads.LastName(ipid), "true");
  EXPECT_FALSE(sb.schedule.Cpus().empty());
}

}  // namespace
}  // namespace ptd
