// Synthesized /proc records, read back with the sideband parser and, for the first
// record, by hand from the raw bytes (so the check does not rest on the builder alone).
#include "recorder/sideband/proc_synth.h"

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <variant>

#include "gtest/gtest.h"
#include "sideband/record_reader.h"

namespace ptd {
namespace {

std::vector<ProcMapping> SomeMappings() {
  std::vector<ProcMapping> maps(4);
  maps[0] = {0x400000, 0x401000, PROT_READ, MAP_PRIVATE, 0, 8, 1, 77, "/bin/prog"};
  maps[1] = {0x401000, 0x405000, PROT_READ | PROT_EXEC, MAP_PRIVATE, 0x1000, 8, 1, 77, "/bin/prog"};
  maps[2] = {0x7f0000000000, 0x7f0000010000, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE,
             0, 0, 0, 0, ""};
  maps[3] = {0x7ffd00000000, 0x7ffd00002000, PROT_READ | PROT_EXEC, MAP_PRIVATE, 0, 0, 0, 0,
             "[vdso]"};
  return maps;
}

TEST(ProcSynthTest, Mmap2ForExecutableMappingsCommAndForkForThreads) {
  ProcSynthOptions options;
  options.time_ns = 12345;
  options.cpu = 1;
  options.id = 99;
  std::vector<ThreadComm> threads = {{100, "prog"}, {101, "worker"}};
  SynthesizedSideband s = SynthesizeRecords(100, SomeMappings(), threads, options);
  EXPECT_EQ(s.mmap_records, 3u);
  EXPECT_EQ(s.comm_records, 2u);
  EXPECT_EQ(s.fork_records, 1u);

  // By hand: the first record is the process's COMM: header, pid, tid, "prog\0" padded
  // to 8, then the trailer tid (pid,tid), time, cpu (cpu,res), identifier.
  ASSERT_GE(s.bytes.size(), 8u);
  perf_event_header h;
  std::memcpy(&h, s.bytes.data(), sizeof(h));
  EXPECT_EQ(h.type, PERF_RECORD_COMM);
  EXPECT_EQ(h.size, 8 + 8 + 8 + 8 + 8 + 8 + 8);
  uint32_t pid_tid[2];
  std::memcpy(pid_tid, s.bytes.data() + 8, 8);
  EXPECT_EQ(pid_tid[0], 100u);
  EXPECT_EQ(pid_tid[1], 100u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(s.bytes.data()) + 16), "prog");
  uint64_t time;
  std::memcpy(&time, s.bytes.data() + 32, 8);
  EXPECT_EQ(time, 12345u);

  absl::StatusOr<RecordList> list = ReadAllRecords(s.bytes, "synth", options.format);
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<const Mmap2Record*> mmaps;
  std::vector<const CommRecord*> comms;
  std::vector<const ForkRecord*> forks;
  for (const PerfRecord& r : list->records) {
    EXPECT_EQ(r.sample_id.time, 12345u);
    EXPECT_EQ(r.sample_id.cpu, 1u);
    EXPECT_EQ(r.sample_id.id, 99u);
    EXPECT_EQ(r.sample_id.pid, 100u);
    if (auto* m = std::get_if<Mmap2Record>(&r.body)) mmaps.push_back(m);
    if (auto* c = std::get_if<CommRecord>(&r.body)) comms.push_back(c);
    if (auto* f = std::get_if<ForkRecord>(&r.body)) forks.push_back(f);
  }
  ASSERT_EQ(mmaps.size(), 3u);
  EXPECT_EQ(mmaps[0]->addr, 0x401000u);
  EXPECT_EQ(mmaps[0]->len, 0x4000u);
  EXPECT_EQ(mmaps[0]->pgoff, 0x1000u);
  EXPECT_EQ(mmaps[0]->maj, 8u);
  EXPECT_EQ(mmaps[0]->min, 1u);
  EXPECT_EQ(mmaps[0]->ino, 77u);
  EXPECT_EQ(mmaps[0]->prot, static_cast<uint32_t>(PROT_READ | PROT_EXEC));
  EXPECT_EQ(mmaps[0]->flags, static_cast<uint32_t>(MAP_PRIVATE));
  EXPECT_EQ(mmaps[0]->filename, "/bin/prog");
  EXPECT_EQ(mmaps[1]->filename, "//anon");  // the kernel's name for anonymous memory
  EXPECT_EQ(mmaps[2]->filename, "[vdso]");
  ASSERT_EQ(comms.size(), 2u);
  EXPECT_EQ(comms[0]->comm, "prog");
  EXPECT_FALSE(comms[0]->exec);
  EXPECT_EQ(comms[1]->tid, 101u);
  EXPECT_EQ(comms[1]->comm, "worker");
  ASSERT_EQ(forks.size(), 1u);
  EXPECT_EQ(forks[0]->pid, 100u);
  EXPECT_EQ(forks[0]->ppid, 100u);  // a thread of the same process
  EXPECT_EQ(forks[0]->tid, 101u);
}

TEST(ProcSynthTest, ThisProcessHasItsThreadsAndCode) {
  std::vector<ThreadComm> threads;
  absl::StatusOr<std::vector<ThreadComm>> read = ReadThreadComms(getpid());
  ASSERT_TRUE(read.ok()) << read.status();
  char comm[32] = {};
  FILE* f = fopen("/proc/self/comm", "r");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(fgets(comm, sizeof(comm), f), nullptr);
  fclose(f);
  comm[strcspn(comm, "\n")] = 0;
  ASSERT_FALSE(read->empty());
  EXPECT_EQ(read->front().tid, getpid());
  EXPECT_EQ(read->front().comm, comm);

  absl::StatusOr<SynthesizedSideband> s = SynthesizeProcess(getpid(), {});
  ASSERT_TRUE(s.ok()) << s.status();
  size_t executable = 0;
  for (const ProcMapping& m : s->mappings) executable += m.executable();
  EXPECT_EQ(s->mmap_records, executable);
  EXPECT_GT(executable, 2u);
  EXPECT_FALSE(SynthesizeProcess(-1, {}).ok());
}

}  // namespace
}  // namespace ptd
