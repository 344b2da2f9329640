// Real recordings with the kernel on this machine (dummy software events; no PT here):
// the tests/programs_core target writes what it sees of itself (/proc/self/maps, its vDSO
// bytes) and the recording must agree with it.
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <variant>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "recorder/sideband/proc_maps.h"
#include "recorder/sideband/sideband_session.h"
#include "tests/recorder_core/recorded_sideband.h"
#include "tests/testing/test_util.h"

extern char** environ;

namespace ptd {
namespace {

using testing::LoadedRecord;
using testing::RecordedSideband;

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

std::vector<ProcMapping> ReadMapsFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return {};
  absl::StatusOr<std::vector<ProcMapping>> maps = ParseProcMaps(*text, path);
  return maps.ok() ? *maps : std::vector<ProcMapping>{};
}

const Mmap2Record* FindMmap2(const std::vector<LoadedRecord>& records, uint64_t start,
                             const std::string& path, const LoadedRecord** holder = nullptr) {
  for (const LoadedRecord& r : records) {
    auto* m = std::get_if<Mmap2Record>(&r.record.body);
    if (m != nullptr && m->addr == start && m->filename == path) {
      if (holder != nullptr) *holder = &r;
      return m;
    }
  }
  return nullptr;
}

// Every executable mapping the program saw of itself at start must be described by an
// MMAP2 with the same address, length, offset and name. Returns the names checked.
std::set<std::string> ExpectExecutableMappingsRecorded(const std::vector<ProcMapping>& maps,
                                                       const std::vector<LoadedRecord>& records,
                                                       const char* origin) {
  std::set<std::string> names;
  for (const ProcMapping& m : maps) {
    if (!m.executable() || m.path == "[vsyscall]") continue;
    const LoadedRecord* holder = nullptr;
    const Mmap2Record* r = FindMmap2(records, m.start, m.path, &holder);
    EXPECT_NE(r, nullptr) << "no MMAP2 for " << m.path << " at 0x" << std::hex << m.start;
    if (r == nullptr) continue;
    EXPECT_EQ(r->len, m.end - m.start) << m.path;
    if (m.path != "[vdso]") {
      EXPECT_EQ(r->pgoff, m.pgoff) << m.path;
      EXPECT_EQ(r->ino, m.inode) << m.path;
    }
    EXPECT_EQ(holder->origin, origin) << m.path;
    names.insert(m.path);
  }
  return names;
}

bool AnyContains(const std::set<std::string>& names, const std::string& part) {
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

uint64_t CommTime(const std::vector<LoadedRecord>& records, const std::string& comm) {
  for (const LoadedRecord& r : records) {
    auto* c = std::get_if<CommRecord>(&r.record.body);
    if (c != nullptr && c->comm == comm) return r.record.sample_id.time;
  }
  return 0;
}

void ExpectVdsoDumpMatches(const RecordedSideband& rec, const std::string& trace_dir,
                           const std::string& out_dir, const std::vector<ProcMapping>& maps,
                           int pid) {
  const ProcMapping* vdso = nullptr;
  for (const ProcMapping& m : maps) {
    if (m.path == "[vdso]") vdso = &m;
  }
  ASSERT_NE(vdso, nullptr);
  const ImageEntry* image = nullptr;
  for (const ImageEntry& e : rec.meta.images) {
    if (e.kind == ImageKind::kVdso) image = &e;
  }
  ASSERT_NE(image, nullptr);
  EXPECT_EQ(image->name, "[vdso]");
  EXPECT_EQ(image->vaddr, vdso->start);
  EXPECT_EQ(image->size, vdso->end - vdso->start);
  EXPECT_EQ(image->pid, pid);
  absl::StatusOr<std::vector<uint8_t>> dumped = ReadFileBytes(ResolveTracePath(trace_dir, image->path));
  absl::StatusOr<std::vector<uint8_t>> own = ReadFileBytes(out_dir + "/vdso.bin");
  ASSERT_TRUE(dumped.ok());
  ASSERT_TRUE(own.ok());
  EXPECT_TRUE(*dumped == *own) << "vDSO dump differs from the bytes the target read itself";
}

// Ends the session, commits the trace directory and reads back what it recorded.
absl::StatusOr<RecordedSideband> FinishAndLoad(SidebandSession& session, TraceDirWriter& dir,
                                               const std::string& trace_dir) {
  TraceMeta meta;
  meta.mode = TraceMode::kEmulated;
  if (absl::Status s = session.Finish(&meta); !s.ok()) return s;
  if (absl::Status s = dir.Commit(meta); !s.ok()) return s;
  return testing::LoadRecordedSideband(trace_dir);
}

void ExpectDlopenAfterMarker(const RecordedSideband& rec, const std::string& out_dir) {
  std::string plugin = RealPath(PTD_CORE_PLUGIN);
  std::vector<ProcMapping> after = ReadMapsFile(out_dir + "/maps_after.txt");
  const ProcMapping* plugin_code = nullptr;
  for (const ProcMapping& m : after) {
    if (m.path == plugin && m.executable()) plugin_code = &m;
  }
  ASSERT_NE(plugin_code, nullptr) << "target did not map " << plugin;
  const LoadedRecord* holder = nullptr;
  const Mmap2Record* r = FindMmap2(rec.records, plugin_code->start, plugin, &holder);
  ASSERT_NE(r, nullptr) << "no MMAP2 for the dlopen'ed " << plugin;
  EXPECT_EQ(holder->origin, "kernel");
  EXPECT_EQ(r->len, plugin_code->end - plugin_code->start);
  EXPECT_EQ(r->pgoff, plugin_code->pgoff);
  EXPECT_TRUE(r->prot & PROT_EXEC);
  uint64_t marker = CommTime(rec.records, "ptd-marker");
  ASSERT_NE(marker, 0u) << "no COMM ptd-marker";
  EXPECT_GT(holder->record.sample_id.time, marker);
}

std::set<std::string> ThreadNames(const std::vector<LoadedRecord>& records, int pid,
                                  const char* origin, std::set<uint32_t>* tids) {
  std::set<std::string> names;
  for (const LoadedRecord& r : records) {
    auto* c = std::get_if<CommRecord>(&r.record.body);
    if (c == nullptr || c->pid != static_cast<uint32_t>(pid) || r.origin != origin) continue;
    names.insert(c->comm);
    if (c->comm.rfind("ptd-worker-", 0) == 0) tids->insert(c->tid);
  }
  return names;
}

class SidebandRecordTest : public ::testing::TestWithParam<bool> {};

// -- CMD: every mapping, name and the vDSO, as the program itself saw them.
TEST_P(SidebandRecordTest, LaunchedMultiThreadedProgram) {
  const bool per_cpu = GetParam();
  testing::TempDir tmp;
  std::string out_dir = tmp.Sub("out");
  ASSERT_TRUE(MakeDirs(out_dir).ok());
  std::string trace_dir = tmp.Sub("trace.dir");
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(trace_dir, false);
  ASSERT_TRUE(dir.ok()) << dir.status();

  SidebandSessionOptions options;
  options.sideband.per_cpu = per_cpu;
  absl::StatusOr<std::unique_ptr<SidebandSession>> session = SidebandSession::Launch(
      {PTD_CORE_MT_TARGET, out_dir, PTD_CORE_PLUGIN}, options, *dir);
  ASSERT_TRUE(session.ok()) << session.status();
  const int pid = (*session)->target().pid();
  absl::StatusOr<int> status = (*session)->target().Wait();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(DescribeWaitStatus(*status), "exited with 0");
  absl::StatusOr<RecordedSideband> rec = FinishAndLoad(**session, *dir, trace_dir);
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(rec->meta.pids, std::vector<int>{pid});
  EXPECT_EQ(rec->meta.command.size(), 3u);
  EXPECT_EQ(rec->meta.per, per_cpu ? "cpu" : "thread");
  ASSERT_FALSE(rec->meta.sideband.empty());
  for (const SidebandFile& f : rec->meta.sideband) {
    EXPECT_EQ(f.origin, "kernel");
    EXPECT_EQ(f.lost_records, 0u);
  }
  EXPECT_LT(rec->meta.start_ns, rec->meta.end_ns);

  std::vector<ProcMapping> start_maps = ReadMapsFile(out_dir + "/maps_start.txt");
  ASSERT_FALSE(start_maps.empty());
  std::set<std::string> names = ExpectExecutableMappingsRecorded(start_maps, rec->records, "kernel");
  EXPECT_TRUE(names.count(RealPath(PTD_CORE_MT_TARGET))) << "executable";
  EXPECT_TRUE(AnyContains(names, "ld-linux")) << "ld.so";
  EXPECT_TRUE(AnyContains(names, "libc.so")) << "libc";
  EXPECT_TRUE(names.count("[vdso]"));

  // The exec itself: COMM with the exec flag for the new image.
  bool exec_comm = false;
  for (const LoadedRecord& r : rec->records) {
    auto* c = std::get_if<CommRecord>(&r.record.body);
    exec_comm |= c != nullptr && c->exec && c->pid == static_cast<uint32_t>(pid);
  }
  EXPECT_TRUE(exec_comm);

  if (per_cpu) {
    // Threads are followed through inherit: each named itself on its own tid.
    std::set<uint32_t> tids;
    std::set<std::string> thread_names = ThreadNames(rec->records, pid, "kernel", &tids);
    for (const char* n : {"ptd-worker-0", "ptd-worker-1", "ptd-worker-2", "ptd-marker"}) {
      EXPECT_TRUE(thread_names.count(n)) << n;
    }
    EXPECT_EQ(tids.size(), 3u);
    EXPECT_EQ(tids.count(static_cast<uint32_t>(pid)), 0u);
  }
  ExpectDlopenAfterMarker(*rec, out_dir);
  ExpectVdsoDumpMatches(*rec, trace_dir, out_dir, start_maps, pid);
}

INSTANTIATE_TEST_SUITE_P(PerCpuAndPerThread, SidebandRecordTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "PerCpu" : "PerThread";
                         });

// --pid: what existed before the attach is synthesized, what came after is real.
TEST(SidebandAttachTest, AttachedProcessGetsSynthesizedThenRealRecords) {
  testing::TempDir tmp;
  std::string out_dir = tmp.Sub("out");
  ASSERT_TRUE(MakeDirs(out_dir).ok());
  std::string trace_dir = tmp.Sub("trace.dir");
  std::vector<std::string> argv = {PTD_CORE_MT_TARGET, out_dir, PTD_CORE_PLUGIN, "--wait"};
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ), 0);
  // The target announces that its threads are named; bounded so a broken target fails.
  bool ready = false;
  for (int i = 0; i < 30000 && !ready; ++i) {
    ready = PathExists(out_dir + "/ready");
    if (!ready) {
      timespec ms{0, 1000000};
      nanosleep(&ms, nullptr);
    }
  }
  if (!ready) kill(pid, SIGKILL);
  ASSERT_TRUE(ready) << "target never became ready";

  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(trace_dir, false);
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<std::unique_ptr<SidebandSession>> session =
      SidebandSession::Attach({pid}, SidebandSessionOptions{}, *dir);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE(WriteFileAtomic(out_dir + "/go", std::string_view("go")).ok());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_EQ(DescribeWaitStatus(status), "exited with 0");
  absl::StatusOr<RecordedSideband> rec = FinishAndLoad(**session, *dir, trace_dir);
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_FALSE(rec->meta.sideband.empty());
  EXPECT_EQ(rec->meta.sideband.front().origin, "synthesized");
  EXPECT_EQ(rec->meta.pids, std::vector<int>{pid});
  std::vector<ProcMapping> start_maps = ReadMapsFile(out_dir + "/maps_start.txt");
  ASSERT_FALSE(start_maps.empty());
  std::set<std::string> names =
      ExpectExecutableMappingsRecorded(start_maps, rec->records, "synthesized");
  EXPECT_TRUE(names.count(RealPath(PTD_CORE_MT_TARGET)));
  EXPECT_TRUE(AnyContains(names, "ld-linux"));
  EXPECT_TRUE(AnyContains(names, "libc.so"));
  EXPECT_TRUE(names.count("[vdso]"));

  // The threads were named before the attach: their names come from /proc.
  std::set<uint32_t> tids;
  std::set<std::string> thread_names = ThreadNames(rec->records, pid, "synthesized", &tids);
  for (const char* n : {"ptd-worker-0", "ptd-worker-1", "ptd-worker-2"}) {
    EXPECT_TRUE(thread_names.count(n)) << n;
  }
  EXPECT_EQ(tids.size(), 3u);

  // Synthesized records come before every real one.
  uint64_t synth_time = 0, first_real = UINT64_MAX;
  for (const LoadedRecord& r : rec->records) {
    if (r.origin == "synthesized") synth_time = std::max(synth_time, r.record.sample_id.time);
    if (r.origin == "kernel") first_real = std::min(first_real, r.record.sample_id.time);
  }
  ASSERT_NE(first_real, UINT64_MAX) << "no real records after the attach";
  EXPECT_LT(synth_time, first_real);

  ExpectDlopenAfterMarker(*rec, out_dir);
  ExpectVdsoDumpMatches(*rec, trace_dir, out_dir, start_maps, pid);
}

}  // namespace
}  // namespace ptd
