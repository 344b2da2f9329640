// What a recording opens its rings on: several attached pids, a cgroup, and the
// perf_event_open target of each.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "recorder/sideband/sideband_recorder.h"
#include "tests/recorder_pt/pt_recording_fixture.h"

namespace ptd::pt {
namespace {

using ::testing::HasSubstr;
using testing::FakeRingFactory;

std::vector<int> SynthesizedPids(const TraceMeta& meta) {
  std::vector<int> pids;
  for (const SidebandFile& f : meta.sideband) {
    int pid = 0;
    if (f.origin == "synthesized" && sscanf(f.file.c_str(), "sideband/synth.%d.data", &pid) == 1) pids.push_back(pid);
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

TEST_F(PtRecordingTest, SeveralPidsGetRingsForEveryThreadOfEach) {
  SleepingChild child;
  ASSERT_GT(child.pid(), 0);
  const int self = static_cast<int>(getpid());
  for (const bool per_thread : {true, false}) {
    SCOPED_TRACE(per_thread ? "per thread" : "per CPU");
    FakeRingFactory factory;
    ptd::testing::TempDir out;
    auto dir = TraceDirWriter::Create(out.Sub("trace.dir"), false);
    ASSERT_TRUE(dir.ok());
    PtRecordingOptions options = options_;
    options.self_tids.clear();
    options.record.pids = {self, child.pid()};
    options.record.per_thread = per_thread;
    auto rec = PtRecording::Start(options, &factory, *dir);
    ASSERT_TRUE(rec.ok()) << rec.status();
    // Every thread of both processes, on every ring (per CPU) or one ring each.
    std::vector<int> expected;
    for (int pid : {self, child.pid()}) {
      for (const auto& task : std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"))) {
        expected.push_back(std::stoi(task.path().filename().string()));
      }
    }
    std::sort(expected.begin(), expected.end());
    std::vector<int> traced;
    for (size_t i = 0; i < factory.size(); ++i) {
      std::vector<int> threads = factory.threads(i);
      if (!per_thread) {
        std::sort(threads.begin(), threads.end());
        EXPECT_EQ(threads, expected) << "ring " << i;
      }
      traced.insert(traced.end(), threads.begin(), threads.end());
    }
    if (per_thread) {
      std::sort(traced.begin(), traced.end());
      EXPECT_EQ(traced, expected);
    }
    EXPECT_EQ(factory.enables(), static_cast<int>(factory.size()));  // running: enabled now
    TraceMeta meta;
    ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
    EXPECT_EQ(meta.pids, (std::vector<int>{self, child.pid()}));
    // The sideband names both: each one's /proc state, synthesized.
    EXPECT_EQ(SynthesizedPids(meta), (std::vector<int>{std::min(self, child.pid()), std::max(self, child.pid())}));
  }
}

TEST_F(PtRecordingTest, CgroupOpensPerCpuEventsOnTheCgroupDirectory) {
  WriteProc(/*paranoid=*/0, /*cap_eff=*/"0000000000000000");  // CPU-wide events
  // A directory with a cgroup.procs: what the recorder reads and opens (the fake kernel
  // checks the fd is a directory; the real one that it is a cgroup's).
  SleepingChild child;
  ptd::testing::TempDir cgroup;
  ASSERT_TRUE(WriteFileAtomic(cgroup.Sub("cgroup.procs"), absl::StrCat(child.pid(), "\n", getpid(), "\n")).ok());
  options_.self_tids.clear();
  options_.record.cgroup = cgroup.path();
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  ASSERT_TRUE(cpus.ok());
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_EQ(factory_.size(), cpus->size());
  std::vector<int> opened;
  for (size_t i = 0; i < factory_.size(); ++i) {
    const PtRingRequest r = factory_.requests()[i];
    opened.push_back(r.cpu);
    EXPECT_EQ(factory_.cgroup_dir(i), cgroup.path()) << "ring " << i;
    EXPECT_EQ(r.tid, -1);
    EXPECT_EQ(factory_.threads(i), std::vector<int>{-1});  // no thread added: the cgroup's tasks
    // perf_event_open(attr, cgroup fd, cpu, -1, PERF_FLAG_PID_CGROUP) for both events.
    const PerfOpenTarget on = PerfOpenTargetOf(r, -1);
    EXPECT_EQ(on.pid, r.cgroup_fd);
    EXPECT_EQ(on.cpu, r.cpu);
    EXPECT_EQ(on.flags, static_cast<unsigned long>(PERF_FLAG_PID_CGROUP));
    EXPECT_EQ(r.attr.inherit, 0u);
    EXPECT_EQ(r.tracking_attr.inherit, 0u);
    EXPECT_EQ(r.attr.enable_on_exec, 0u);
  }
  EXPECT_EQ(opened, *cpus);
  EXPECT_EQ(factory_.enables(), static_cast<int>(factory_.size()));
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
  EXPECT_EQ(meta.per, "cpu");
  // The sideband names the processes in the cgroup at the start.
  const std::vector<int> members = {std::min<int>(getpid(), child.pid()), std::max<int>(getpid(), child.pid())};
  EXPECT_EQ(meta.pids, members);
  EXPECT_EQ(SynthesizedPids(meta), members);
}

TEST_F(PtRecordingTest, CgroupNewcomersAreDescribedAtTheNextDrain) {
  WriteProc(/*paranoid=*/0, /*cap_eff=*/"0000000000000000");  // CPU-wide events
  // The cgroup's events count a process that joins by themselves; the recorder must
  // still name it: the next drain reads cgroup.procs and synthesizes the newcomer.
  SleepingChild first, newcomer;
  ptd::testing::TempDir cgroup;
  ASSERT_TRUE(WriteFileAtomic(cgroup.Sub("cgroup.procs"), absl::StrCat(first.pid(), "\n")).ok());
  options_.self_tids.clear();
  options_.record.cgroup = cgroup.path();
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_TRUE((*rec)->Drain().ok());
  ASSERT_TRUE(
      WriteFileAtomic(cgroup.Sub("cgroup.procs"), absl::StrCat(first.pid(), "\n", newcomer.pid(), "\n")).ok());
  ASSERT_TRUE((*rec)->Drain().ok());
  ASSERT_TRUE((*rec)->Drain().ok());  // seen once only
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
  EXPECT_EQ(meta.pids, (std::vector<int>{first.pid(), newcomer.pid()}));
  EXPECT_EQ(SynthesizedPids(meta), (std::vector<int>{first.pid(), newcomer.pid()}));
  int notes = 0;
  for (const std::string& note : meta.notes) notes += note.find(absl::StrCat("process ", newcomer.pid(), " joined")) == 0;
  EXPECT_EQ(notes, 1);
}

TEST_F(PtRecordingTest, CgroupRefusesPerThreadRingsAndANonCgroupPath) {
  WriteProc(/*paranoid=*/0, /*cap_eff=*/"0000000000000000");  // CPU-wide events
  options_.self_tids.clear();
  ptd::testing::TempDir cgroup;
  options_.record.cgroup = cgroup.path();
  options_.record.per_thread = true;
  auto per_thread = Start();
  ASSERT_FALSE(per_thread.ok());
  EXPECT_EQ(per_thread.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(per_thread.status().message()), HasSubstr("per-CPU"));
  options_.record.per_thread = false;
  auto not_cgroup = Start();  // no cgroup.procs in it
  ASSERT_FALSE(not_cgroup.ok());
  EXPECT_THAT(std::string(not_cgroup.status().message()), HasSubstr("not a cgroup directory"));
  EXPECT_EQ(factory_.size(), 0u);
}

// The kernel takes file address filters only on per-task events; a cgroup's events are
// CPU-wide (perf_event_parse_addr_filter: EOPNOTSUPP).
// A cgroup's events have no task: perf_allow_cpu wants perf_event_paranoid <= 0 or
// CAP_PERFMON, and perf_event_open would fail with EACCES on every CPU.
TEST_F(PtRecordingTest, CgroupNeedsCpuWideRightsAndSaysWhichSetting) {
  options_.self_tids.clear();
  WriteProc(/*paranoid=*/1, /*cap_eff=*/"0000000000000000");
  ptd::testing::TempDir cgroup;
  ASSERT_TRUE(WriteFileAtomic(cgroup.Sub("cgroup.procs"), absl::StrCat(getpid(), "\n")).ok());
  options_.record.cgroup = cgroup.path();
  auto rec = Start();
  ASSERT_FALSE(rec.ok());
  EXPECT_EQ(rec.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(rec.status().message()), HasSubstr("perf_event_paranoid=0"));
  EXPECT_THAT(std::string(rec.status().message()), HasSubstr("CAP_PERFMON"));
  EXPECT_EQ(factory_.size(), 0u);
}

TEST_F(PtRecordingTest, CgroupWithAFilterIsRefusedBeforeAnyRingOpens) {
  WriteProc(/*paranoid=*/0, /*cap_eff=*/"0000000000000000");  // CPU-wide events
  options_.self_tids.clear();
  ptd::testing::TempDir cgroup;
  ASSERT_TRUE(WriteFileAtomic(cgroup.Sub("cgroup.procs"), absl::StrCat(getpid(), "\n")).ok());
  options_.record.cgroup = cgroup.path();
  options_.record.filter =
      absl::StrCat("filter ptd_trigger_point@", PTD_BINARY_DIR, "/tests/recorder_pt/ptd-trigger-target");
  auto rec = Start();
  ASSERT_FALSE(rec.ok());
  EXPECT_EQ(rec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(rec.status().message()), HasSubstr("--filter"));
  EXPECT_THAT(std::string(rec.status().message()), HasSubstr("--cgroup"));
  EXPECT_THAT(std::string(rec.status().message()), HasSubstr("--pid"));
  EXPECT_EQ(factory_.size(), 0u);
}

TEST(PerfOpenTargetTest, ThreadEventsTakeTheTidAndCgroupEventsTheDirectoryFd) {
  PtRingRequest thread;
  thread.cpu = 3;
  const PerfOpenTarget on_thread = PerfOpenTargetOf(thread, 1234);
  EXPECT_EQ(on_thread.pid, 1234);
  EXPECT_EQ(on_thread.cpu, 3);
  EXPECT_EQ(on_thread.flags, 0u);
  PtRingRequest cgroup;
  cgroup.cpu = 2;
  cgroup.cgroup_fd = 17;
  const PerfOpenTarget on_cgroup = PerfOpenTargetOf(cgroup, -1);
  EXPECT_EQ(on_cgroup.pid, 17);
  EXPECT_EQ(on_cgroup.cpu, 2);
  EXPECT_EQ(on_cgroup.flags, static_cast<unsigned long>(PERF_FLAG_PID_CGROUP));
}

}  // namespace
}  // namespace ptd::pt
