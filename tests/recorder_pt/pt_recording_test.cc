// PtRecording (events, rings, snapshots, drains) over the fake kernel, self-tracing so
// that no process is needed: what a real kernel would do to the recorder's choices.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <thread>
#include <condition_variable>
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "recorder/sideband/data_ring.h"
#include "recorder/sideband/perf_event.h"
#include "recorder/sideband/perf_mmap.h"
#include "recorder/pt/pt_recording.h"
#include "recorder/pt/record_session.h"
#include "recorder/sideband/sideband_events.h"
#include "recorder/sideband/sideband_recorder.h"
#include "sideband/record_builder.h"
#include "sideband/record_reader.h"
#include "tests/recorder_pt/fake_ring_factory.h"
#include "tests/recorder_pt/fake_sysfs.h"
#include "tests/testing/test_util.h"

namespace ptd::pt {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::FakePtKernel;
using testing::FakePtSysfs;
using testing::FakeRingFactory;

std::vector<uint8_t> Comm(const char* name) {
  PerfRecord comm;
  comm.body = CommRecord{77, 78, name};
  return EncodeRecord(comm, RecordFormat{});
}

class PtRecordingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakePtSysfs().WriteTo(sysfs_.path());
    WriteProc(/*paranoid=*/2, /*cap_eff=*/"0000000000000000");
    options_.sysfs_root = sysfs_.path();
    options_.proc_root = proc_.path();
    options_.self_tids = {static_cast<int>(syscall(SYS_gettid))};
    options_.record.snapshot = true;
    options_.record.snapshot_size = 4 * 4096;
    options_.record.buffer_size = 4 * 4096;
    options_.record.data_size = 16 * 4096;
    options_.record.default_ring_sizes = false;
    auto dir = TraceDirWriter::Create(out_.Sub("trace.dir"), false);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<TraceDirWriter>(*std::move(dir));
  }
  void WriteProc(int paranoid, const std::string& cap_eff) {
    ASSERT_TRUE(MakeDirs(proc_.Sub("sys/kernel")).ok());
    ASSERT_TRUE(MakeDirs(proc_.Sub("self")).ok());
    ASSERT_TRUE(WriteFileAtomic(proc_.Sub("sys/kernel/perf_event_paranoid"),
                                absl::StrCat(paranoid, "\n"))
                    .ok());
    ASSERT_TRUE(
        WriteFileAtomic(proc_.Sub("self/status"), absl::StrCat("Name:\tx\nCapEff:\t", cap_eff, "\n"))
            .ok());
  }
  absl::StatusOr<std::unique_ptr<PtRecording>> Start() {
    return PtRecording::Start(options_, &factory_, *dir_);
  }
  // Records of a ring's sideband file, after Finish.
  std::vector<PerfRecord> Sideband(const TraceMeta& meta, size_t ring) {
    auto bytes = ReadFileToString(dir_->FilePath(meta.sideband.at(ring).file));
    EXPECT_TRUE(bytes.ok());
    RecordFormat format;
    format.sample_type = kSidebandSampleType;
    format.sample_id_all = true;
    auto records = ReadAllRecords(
        absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()),
        "sb", format);
    EXPECT_TRUE(records.ok()) << records.status();
    return records.ok() ? records->records : std::vector<PerfRecord>{};
  }
  static int Count(const std::vector<PerfRecord>& records, uint32_t type) {
    int n = 0;
    for (const PerfRecord& r : records) n += r.type == type;
    return n;
  }

  ptd::testing::TempDir sysfs_;
  ptd::testing::TempDir proc_;
  ptd::testing::TempDir out_;
  FakeRingFactory factory_;
  PtRecordingOptions options_;
  std::unique_ptr<TraceDirWriter> dir_;
};

TEST_F(PtRecordingTest, SidebandIsOnATrackingEventNotOnThePtEvent) {
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  for (const PtRingRequest& r : factory_.requests()) {
    EXPECT_EQ(r.attr.mmap2 | r.attr.comm | r.attr.task | r.attr.context_switch, 0u);
    EXPECT_EQ(r.attr.sample_id_all, 1u);  // its PERF_RECORD_AUX carry time and cpu
    EXPECT_EQ(r.tracking_attr.config, static_cast<uint64_t>(PERF_COUNT_SW_DUMMY));
    EXPECT_EQ(r.tracking_attr.mmap2 & r.tracking_attr.comm & r.tracking_attr.task &
                  r.tracking_attr.context_switch,
              1u);
  }
}

TEST_F(PtRecordingTest, SnapshotKeepsSidebandAndWritesNoSpuriousLost) {
  // A library mapped while the snapshot has PT disabled, and the PERF_RECORD_AUX that
  // each DISABLE writes: both must reach the file, and nothing is counted lost.
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  FakePtKernel& k = factory_.kernel(0);
  const std::vector<uint8_t> comm = Comm("mapped-meanwhile");
  k.on_pt_disabled = [&] { k.EmitSideband(comm); };
  k.WriteTrace(testing::TraceBytes(3000, 1));
  ASSERT_TRUE((*rec)->Snapshot("control").ok());
  k.WriteTrace(testing::TraceBytes(2000, 2));
  k.SchedOut();
  ASSERT_TRUE((*rec)->Drain().ok());
  ASSERT_TRUE((*rec)->Snapshot("control").ok());
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
  std::vector<PerfRecord> records = Sideband(meta, 0);
  EXPECT_EQ(Count(records, PERF_RECORD_COMM), 2);
  EXPECT_EQ(Count(records, PERF_RECORD_LOST), 0);
  EXPECT_EQ(Count(records, PERF_RECORD_AUX), 3);  // 2 disables + 1 sched-out
  EXPECT_EQ(meta.sideband.at(0).lost_records, 0u);
  EXPECT_EQ(k.sideband_not_generated(), 0u);
  for (const PtChunk& c : meta.streams.at(0).chunks) EXPECT_FALSE(c.lost_before);
}

TEST_F(PtRecordingTest, SidebandContinuesWhileATruncatedRingIsDisabled) {
  // Linear mode: a full ring makes the kernel disable the PT event until the reader
  // enables it again. A thread forked meanwhile must still be reported.
  options_.record.snapshot = false;
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  FakePtKernel& k = factory_.kernel(0);
  k.WriteTrace(testing::TraceBytes(3 * options_.record.buffer_size, 3));
  ASSERT_FALSE(k.pt_enabled());
  EXPECT_TRUE(k.EmitSideband(Comm("forked-meanwhile")));
  ASSERT_TRUE((*rec)->Drain().ok());
  EXPECT_TRUE(k.pt_enabled()) << "the drain enables PT again";
  // A linear snapshot is a drain too, and may be the one that finds the truncation.
  k.WriteTrace(testing::TraceBytes(3 * options_.record.buffer_size, 7));
  ASSERT_FALSE(k.pt_enabled());
  ASSERT_TRUE((*rec)->Snapshot("sigusr2").ok());
  EXPECT_TRUE(k.pt_enabled()) << "the snapshot enables PT again";
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("exit", {}, &meta).ok());
  EXPECT_EQ(Count(Sideband(meta, 0), PERF_RECORD_COMM), 1);
  EXPECT_TRUE(meta.streams.at(0).chunks.at(0).truncated);
}

TEST_F(PtRecordingTest, ATruncationWhoseRecordTheFullDataRingDroppedStillReenablesPt) {
  // The PERF_RECORD_AUX with TRUNCATED goes through the DATA ring like any record: when
  // that ring is full the kernel counts it lost, and the event is still disabled
  // (pending_disable). The PERF_RECORD_LOST in front of the next record the tracking
  // event writes (a context switch, an mmap) is then all the reader has to go on.
  options_.record.snapshot = false;
  options_.record.data_size = 4096;
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  FakePtKernel& k = factory_.kernel(0);
  while (k.EmitSideband(Comm("filler"))) {
  }
  k.WriteTrace(testing::TraceBytes(3 * options_.record.buffer_size, 5));
  ASSERT_FALSE(k.pt_enabled());
  ASSERT_TRUE((*rec)->Drain().ok());
  ASSERT_TRUE(k.EmitSideband(Comm("switch")));  // preceded by the PERF_RECORD_LOST
  ASSERT_TRUE((*rec)->Drain().ok());
  EXPECT_TRUE(k.pt_enabled()) << "PT left disabled for the rest of the recording";
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("exit", {}, &meta).ok());
  EXPECT_GT(meta.sideband.at(0).lost_records, 0u);
}

TEST_F(PtRecordingTest, AnEventDisabledForWantOfRoomWithNoRecordIsEnabledAgain) {
  // Filled exactly to the ring's end, the kernel ends the transaction at the sched-out;
  // the next one begins with no room: perf_aux_output_begin disables the event with a
  // wakeup and writes no PERF_RECORD_AUX at all, so no TRUNCATED flag says so.
  options_.record.snapshot = false;
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  FakePtKernel& k = factory_.kernel(0);
  const size_t ring = options_.record.buffer_size;
  ASSERT_EQ(k.WriteTrace(testing::TraceBytes(ring, 9)), ring);
  k.SchedOut();
  EXPECT_EQ(k.WriteTrace(testing::TraceBytes(100, 10)), 0u);
  ASSERT_FALSE(k.pt_enabled());
  ASSERT_TRUE((*rec)->Drain().ok());
  EXPECT_TRUE(k.pt_enabled()) << "PT left disabled for the rest of the recording";
  EXPECT_EQ(k.WriteTrace(testing::TraceBytes(100, 11)), 100u);
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("exit", {}, &meta).ok());
}

TEST_F(PtRecordingTest, PerCpuSnapshotIsOneCut) {
  // Every ring is disabled before any is read: trace a CPU writes after another CPU's
  // ring resumed is not in this snapshot.
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  ASSERT_TRUE(cpus.ok());
  if (cpus->size() < 2) GTEST_SKIP() << "needs two online CPUs for two per-CPU rings";
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_EQ(factory_.size(), cpus->size());
  FakePtKernel& cpu0 = factory_.kernel(0);
  FakePtKernel& cpu1 = factory_.kernel(1);
  cpu0.WriteTrace(testing::TraceBytes(1000, 4));
  cpu1.WriteTrace(testing::TraceBytes(1000, 5));
  cpu0.on_pt_enabled = [&] { cpu1.WriteTrace(testing::TraceBytes(500, 6)); };
  ASSERT_TRUE((*rec)->Snapshot("trigger").ok());
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("trigger", {}, &meta).ok());
  ASSERT_EQ(meta.streams.at(1).chunks.size(), 1u);
  EXPECT_EQ(meta.streams.at(1).chunks[0].size, 1000u);
}

TEST_F(PtRecordingTest, AThreadThatExitsWhileOpeningIsToleratedPerCpu) {
  options_.self_tids.push_back(999999);  // ESRCH
  factory_.gone_tids = {999999};
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_GE(factory_.size(), 1u);
  for (size_t i = 0; i < factory_.size(); ++i) {
    EXPECT_EQ(factory_.threads(i), std::vector<int>{options_.self_tids.front()});
  }
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("exit", {}, &meta).ok());
  int notes = 0;
  for (const std::string& note : meta.notes) notes += note.find("999999") != std::string::npos;
  EXPECT_EQ(notes, 1);
}

TEST_F(PtRecordingTest, DefaultSizesFitTheLockedMemoryLimitOfUnprivilegedUsers) {
  // perf_event_mlock_kb (516 KiB) per CPU, no CAP_IPC_LOCK: 16 MiB rings get EPERM.
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  ASSERT_TRUE(cpus.ok());
  factory_.mlock_limit_bytes = 516 * 1024 * cpus->size();
  options_.record = RecordOptions{};
  options_.record.snapshot = true;
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  for (const PtRingRequest& r : factory_.requests()) {
    EXPECT_EQ(r.aux_size, 128u << 10);
    EXPECT_EQ(r.data_size, 256u << 10);
  }
}

// Per-thread mode opens one ring per thread, all charged to the same per-user budget of
// perf_event_mlock_kb per CPU: more threads than CPUs must get smaller rings, with room
// left for as many threads again.
TEST_F(PtRecordingTest, PerThreadDefaultSizesFitEveryThreadsRingInTheUsersBudget) {
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  ASSERT_TRUE(cpus.ok());
  const uint64_t budget = 516 * 1024 * cpus->size();
  factory_.mlock_limit_bytes = budget;
  options_.record = RecordOptions{};
  options_.record.snapshot = true;
  options_.record.per_thread = true;
  for (size_t i = 0; i < 2 * cpus->size() + 1; ++i) {
    options_.self_tids.push_back(static_cast<int>(4100000 + i));  // the fake opens any tid
  }
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(factory_.size(), options_.self_tids.size());
  EXPECT_LE(factory_.mapped_bytes(), budget / 2) << "no room left for new threads";
  for (const PtRingRequest& r : factory_.requests()) {
    EXPECT_LT(r.aux_size, 128u << 10);
    EXPECT_GE(r.aux_size, 4096u);
  }
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
  EXPECT_THAT(meta.notes, Contains(HasSubstr("rings sized for")));
}

TEST_F(PtRecordingTest, AFailedPerfClockProbeIsSaidNotTakenAsZero) {
  // The fake's event page offers no TSC conversion (cap_user_time_zero 0), as on VMs
  // without a stable TSC: the recorder needs the measured perf clock offset.
  options_.measure_perf_clock_offset = []() -> absl::StatusOr<int64_t> {
    return absl::PermissionDeniedError("perf_event_open(dummy) failed: Permission denied");
  };
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
  EXPECT_THAT(meta.notes, Contains(AllOf(HasSubstr("perf clock"), HasSubstr("Permission denied"),
                                         HasSubstr("CLOCK_MONOTONIC"))));
}

TEST_F(PtRecordingTest, TheMeasuredPerfClockOffsetStampsTheRecording) {
  // A large offset makes the recording's times land near it: it is applied, not dropped.
  static constexpr int64_t kOffset = int64_t{1} << 60;
  options_.measure_perf_clock_offset = []() -> absl::StatusOr<int64_t> { return kOffset; };
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
  EXPECT_GE(meta.start_ns, static_cast<uint64_t>(kOffset));
  EXPECT_THAT(meta.notes, Not(Contains(HasSubstr("perf clock"))));
}

TEST_F(PtRecordingTest, CapIpcLockKeepsTheLargeDefaults) {
  WriteProc(2, "0000000000004000");  // CAP_IPC_LOCK (bit 14)
  options_.record = RecordOptions{};
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(factory_.requests().at(0).aux_size, RecordOptions{}.buffer_size);
}

TEST(RingSizesTest, DefaultFullTraceRingsShrinkWithTheNumberOfCpus) {
  PerfAccess unlimited;
  unlimited.has_ipc_lock = true;
  const RecordOptions defaults;
  EXPECT_EQ(WithRingSizes(defaults, unlimited, 8).buffer_size, 16ull << 20);
  EXPECT_EQ(WithRingSizes(defaults, unlimited, 16).buffer_size, 16ull << 20);
  EXPECT_EQ(WithRingSizes(defaults, unlimited, 32).buffer_size, 8ull << 20);
  EXPECT_EQ(WithRingSizes(defaults, unlimited, 200).buffer_size, 4ull << 20) << "perf's floor";
  RecordOptions given = defaults;
  given.default_ring_sizes = false;
  EXPECT_EQ(WithRingSizes(given, unlimited, 200).buffer_size, 16ull << 20) << "a size given is kept";
  RecordOptions per_thread = defaults;
  per_thread.per_thread = true;
  EXPECT_EQ(WithRingSizes(per_thread, unlimited, 200).buffer_size, 16ull << 20);
}

TEST_F(PtRecordingTest, LockedMemoryRefusalExplainsWhatToChange) {
  factory_.mlock_limit_bytes = 64 * 1024;
  options_.record.snapshot_size = 1 << 20;
  auto rec = Start();
  ASSERT_FALSE(rec.ok());
  EXPECT_EQ(rec.status().code(), absl::StatusCode::kPermissionDenied);
  const std::string message(rec.status().message());
  EXPECT_THAT(message, HasSubstr("perf_event_mlock_kb"));
  EXPECT_THAT(message, HasSubstr("CAP_IPC_LOCK"));
  EXPECT_THAT(message, HasSubstr("--snapshot-size"));
}

TEST_F(PtRecordingTest, CpuWidePtUserMakesAPerTaskRecordingBusy) {
  factory_.other_pt_events = -1;  // perf record -a -e intel_pt runs
  auto rec = Start();
  ASSERT_FALSE(rec.ok());
  EXPECT_EQ(rec.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(rec.status().message());
  EXPECT_THAT(message, HasSubstr("Device or resource busy"));
  EXPECT_THAT(message, HasSubstr("another PT user is active: a CPU-wide Intel PT session"));
  EXPECT_THAT(message, HasSubstr("LBR"));
  EXPECT_EQ(factory_.mapped_bytes(), 0u);
}

TEST_F(PtRecordingTest, SecondTracerOfAThreadIsBusy) {
  factory_.other_traced_tids = {options_.self_tids.front()};
  auto rec = Start();
  ASSERT_FALSE(rec.ok());
  EXPECT_THAT(std::string(rec.status().message()),
              HasSubstr("a second tracer of this thread holds its PT"));
}

TEST_F(PtRecordingTest, PerTaskPtUserMakesACgroupRecordingBusy) {
  WriteProc(/*paranoid=*/0, /*cap_eff=*/"0000000000000000");  // CPU-wide events
  ptd::testing::TempDir cgroup;
  ASSERT_TRUE(WriteFileAtomic(cgroup.Sub("cgroup.procs"), absl::StrCat(getpid(), "\n")).ok());
  options_.self_tids.clear();
  options_.record.cgroup = cgroup.path();
  factory_.other_pt_events = 1;  // perf record -e intel_pt -p PID runs
  auto rec = Start();
  ASSERT_FALSE(rec.ok());
  const std::string message(rec.status().message());
  EXPECT_THAT(message, HasSubstr("another PT user is active: per-task Intel PT events exist"));
  EXPECT_THAT(message, HasSubstr("CPU-wide"));
}

TEST_F(PtRecordingTest, RingsAreOpenedOnOnlineCpus) {
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  ASSERT_TRUE(cpus.ok());
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  std::vector<int> opened;
  for (const PtRingRequest& r : factory_.requests()) opened.push_back(r.cpu);
  EXPECT_EQ(opened, *cpus);
}

// A child that sleeps until killed: a second process to attach to.
class SleepingChild {
 public:
  SleepingChild() : pid_(fork()) {
    if (pid_ == 0) {
      pause();
      _exit(0);
    }
  }
  ~SleepingChild() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  int pid() const { return pid_; }

 private:
  int pid_;
};

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

// A PERF_RECORD_FORK as the kernel writes it into the ring of the creating task
// (perf_event_task_output: ppid/ptid are current's, pid/tid the new task's): pid == ppid
// for a new thread, pid != ppid for a child process.
void WriteFork(FakePtKernel& k, uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid) {
  RecordFormat format;
  format.sample_type = kSidebandSampleType;
  format.sample_id_all = true;
  RecordBuilder builder(format);
  ForkRecord fork;
  fork.pid = pid;
  fork.ppid = ppid;
  fork.tid = tid;
  fork.ptid = ptid;
  fork.time = 123;
  SampleId id;
  id.pid = ppid;
  id.tid = ptid;
  id.time = 123;
  builder.Append(fork, id);
  EXPECT_TRUE(k.WriteRecord(builder.bytes()));
}

// Tids the fake opens whatever they are: a new thread of the target, a child process of
// it and a thread of that child.
constexpr uint32_t kNewThread = 4000001;
constexpr uint32_t kChild = 4000002;
constexpr uint32_t kChildThread = 4000003;

// One recording attached to `target` over its own fake kernel and trace directory. The
// target's (first) ring reports a new thread and a forked child; the child's ring, if
// opened, a thread of the child.
struct FollowRun {
  FollowRun(PtRecordingOptions options, int target_pid, bool per_thread, bool follow) {
    options.self_tids.clear();
    options.record.pids = {target_pid};
    options.record.per_thread = per_thread;
    options.record.follow_children = follow;
    const uint32_t target = static_cast<uint32_t>(target_pid);
    factory.on_open = [this, target](FakePtKernel& k) {
      if (k.options().pid == target && !forks_written) {
        forks_written = true;  // per CPU: on one ring, where the target ran
        WriteFork(k, target, target, kNewThread, target);
        WriteFork(k, kChild, target, kChild, target);
      } else if (k.options().pid == kChild) {
        WriteFork(k, kChild, kChild, kChildThread, kChild);
      }
    };
    auto created = TraceDirWriter::Create(out.Sub("trace.dir"), false);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return;
    dir = std::make_unique<TraceDirWriter>(*std::move(created));
    auto started = PtRecording::Start(options, &factory, *dir);
    EXPECT_TRUE(started.ok()) << started.status();
    if (started.ok()) rec = *std::move(started);
  }
  // Two drains: the first reads the target's FORKs, the second those of rings opened then.
  void DrainTwice() {
    EXPECT_TRUE(rec->Drain().ok());
    EXPECT_TRUE(rec->Drain().ok());
  }
  std::vector<int> RingTids() const {
    std::vector<int> tids;
    for (const PtRingRequest& r : factory.requests()) tids.push_back(r.tid);
    return tids;
  }
  TraceMeta Finish() {
    TraceMeta meta;
    EXPECT_TRUE(rec->Finish("control", {}, &meta).ok());
    return meta;
  }

  FakeRingFactory factory;
  ptd::testing::TempDir out;
  std::unique_ptr<TraceDirWriter> dir;
  std::unique_ptr<PtRecording> rec;
  bool forks_written = false;
};

// A new thread whose ring the kernel refuses (EPERM: locked memory spent; EMFILE) is
// one thread lost, not the end of the recording.
TEST_F(PtRecordingTest, PerThreadModeKeepsRecordingWhenANewThreadsRingIsRefused) {
  SleepingChild target;
  ASSERT_GT(target.pid(), 0);
  FollowRun run(options_, target.pid(), /*per_thread=*/true, /*follow=*/false);
  ASSERT_NE(run.rec, nullptr);
  const PtRingRequest first = run.factory.requests().at(0);
  run.factory.mlock_limit_bytes = FakePtKernel::kPage + first.data_size + first.aux_size;
  absl::Status drained = run.rec->Drain();
  EXPECT_TRUE(drained.ok()) << drained;
  EXPECT_TRUE(run.rec->Drain().ok());
  TraceMeta meta = run.Finish();
  EXPECT_THAT(meta.notes, Contains(AllOf(HasSubstr("thread 4000001 not traced"),
                                         HasSubstr("locked-memory"))));
}

// Per-thread mode: an exited thread's ring is read one last time and released, so its
// locked memory (one budget per user, given back at munmap) serves the next new thread.
TEST_F(PtRecordingTest, PerThreadModeReleasesTheRingsOfExitedThreads) {
  SleepingChild target;
  ASSERT_GT(target.pid(), 0);
  const uint32_t pid = static_cast<uint32_t>(target.pid());
  options_.record.snapshot = false;
  FollowRun run(options_, target.pid(), /*per_thread=*/true, /*follow=*/false);
  ASSERT_NE(run.rec, nullptr);
  const PtRingRequest first = run.factory.requests().at(0);
  const uint64_t ring_bytes = FakePtKernel::kPage + first.data_size + first.aux_size;
  run.factory.mlock_limit_bytes = 2 * ring_bytes;  // room for two rings at a time
  ASSERT_TRUE(run.rec->Drain().ok());  // the FORK: a ring for the new thread
  ASSERT_EQ(run.factory.size(), 2u);
  FakePtKernel& exiting = run.factory.kernel(1);
  ASSERT_EQ(exiting.WriteTrace(testing::TraceBytes(1000, 8)), 1000u);
  exiting.ExitTask();  // stops its event (the trace published) and hangs up
  ASSERT_TRUE(run.rec->Drain().ok());
  EXPECT_TRUE(exiting.unmapped()) << "the exited thread's ring is still mapped";
  EXPECT_EQ(run.factory.mapped_bytes(), ring_bytes);
  constexpr uint32_t kLaterThread = 4000004;
  WriteFork(run.factory.kernel(0), pid, pid, kLaterThread, pid);
  ASSERT_TRUE(run.rec->Drain().ok());
  EXPECT_EQ(run.RingTids().back(), static_cast<int>(kLaterThread));
  TraceMeta meta = run.Finish();
  EXPECT_THAT(meta.notes, Not(Contains(HasSubstr("not traced"))));
  EXPECT_THAT(meta.notes, Contains(HasSubstr(absl::StrCat("thread ", kNewThread, " exited while recording"))));
  const auto exited = std::find_if(meta.streams.begin(), meta.streams.end(),
                                   [](const PtStream& s) { return s.tid == static_cast<int>(kNewThread); });
  ASSERT_NE(exited, meta.streams.end()) << "the released ring's stream is still listed";
  ASSERT_EQ(exited->chunks.size(), 1u);
  EXPECT_EQ(exited->chunks[0].size, 1000u);
  EXPECT_TRUE(std::any_of(meta.sideband.begin(), meta.sideband.end(),
                          [](const SidebandFile& f) { return f.tid == static_cast<int>(kNewThread); }))
      << "the released ring's sideband file is still listed";
}

TEST_F(PtRecordingTest, PerThreadModeFollowsAForkedChildAndItsThreadsUnlessNoFollow) {
  SleepingChild target;
  ASSERT_GT(target.pid(), 0);
  const int pid = target.pid();
  {
    SCOPED_TRACE("follow");
    FollowRun run(options_, pid, /*per_thread=*/true, /*follow=*/true);
    ASSERT_NE(run.rec, nullptr);
    ASSERT_TRUE(run.rec->Drain().ok());  // the target's FORKs: rings for both new tasks
    EXPECT_EQ(run.RingTids(), (std::vector<int>{pid, static_cast<int>(kNewThread), static_cast<int>(kChild)}));
    ASSERT_TRUE(run.rec->Drain().ok());  // the child's FORK: its thread is followed too
    EXPECT_EQ(run.RingTids(), (std::vector<int>{pid, static_cast<int>(kNewThread), static_cast<int>(kChild),
                                                static_cast<int>(kChildThread)}));
    for (const PtRingRequest& r : run.factory.requests()) {
      EXPECT_EQ(r.cpu, -1);
      EXPECT_EQ(r.attr.inherit, 0u);
      EXPECT_EQ(r.attr.enable_on_exec, 0u) << "tid " << r.tid << " runs already";
    }
    EXPECT_EQ(run.factory.enables(), 4) << "attach enables the target's ring, the others as opened";
    TraceMeta meta = run.Finish();
    EXPECT_EQ(meta.pids, std::vector<int>{pid}) << "the attached process, not its children";
    EXPECT_EQ(meta.streams.size(), 4u);
    EXPECT_THAT(meta.notes, Contains(HasSubstr(absl::StrCat("process ", kChild, " (a child of ", pid,
                                                            ") was created while recording"))));
    EXPECT_THAT(meta.notes, Contains(HasSubstr(absl::StrCat("thread ", kChildThread, " was created"))));
  }
  {
    SCOPED_TRACE("--no-follow");
    FollowRun run(options_, pid, /*per_thread=*/true, /*follow=*/false);
    ASSERT_NE(run.rec, nullptr);
    run.DrainTwice();
    EXPECT_EQ(run.RingTids(), (std::vector<int>{pid, static_cast<int>(kNewThread)}))
        << "the target's new thread is followed, its child is not";
    TraceMeta meta = run.Finish();
    EXPECT_THAT(meta.notes, Not(Contains(HasSubstr(absl::StrCat("process ", kChild)))));
  }
}

TEST_F(PtRecordingTest, PerCpuModeWithNoFollowAddsNewThreadsButNotChildren) {
  SleepingChild target;
  ASSERT_GT(target.pid(), 0);
  const int pid = target.pid();
  {
    SCOPED_TRACE("--no-follow");
    FollowRun run(options_, pid, /*per_thread=*/false, /*follow=*/false);
    ASSERT_NE(run.rec, nullptr);
    const size_t rings = run.factory.size();
    ASSERT_GE(rings, 1u);
    for (const PtRingRequest& r : run.factory.requests()) {
      EXPECT_GE(r.cpu, 0);
      EXPECT_EQ(r.attr.inherit, 0u) << "inherited events would follow the children";
      EXPECT_EQ(r.tracking_attr.inherit, 0u);
    }
    run.DrainTwice();
    EXPECT_EQ(run.factory.size(), rings) << "no ring of its own for any thread";
    for (size_t i = 0; i < rings; ++i) {
      EXPECT_EQ(run.factory.threads(i), (std::vector<int>{pid, static_cast<int>(kNewThread)})) << "ring " << i;
    }
    EXPECT_EQ(run.factory.enables(), static_cast<int>(2 * rings)) << "at attach, then for the new thread";
    TraceMeta meta = run.Finish();
    EXPECT_THAT(meta.notes, Contains(HasSubstr(absl::StrCat("thread ", kNewThread, " was created"))));
  }
  {
    SCOPED_TRACE("follow: the kernel's inheritance follows threads and children");
    FollowRun run(options_, pid, /*per_thread=*/false, /*follow=*/true);
    ASSERT_NE(run.rec, nullptr);
    for (const PtRingRequest& r : run.factory.requests()) {
      EXPECT_EQ(r.attr.inherit, 1u);
      EXPECT_EQ(r.tracking_attr.inherit, 1u);
    }
    run.DrainTwice();
    for (size_t i = 0; i < run.factory.size(); ++i) EXPECT_EQ(run.factory.threads(i), std::vector<int>{pid});
    run.Finish();
  }
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

// The kernel makes the page's lock odd while it rewrites the conversion
// (perf_event_update_userpage: ++lock, write, ++lock), and perf's reader
// (perf_read_tsc_conversion) retries until it sees the same even value twice. A page left
// odd with half-written values must not be read; the writer finishes it a little later.
TEST(PerfClockTest, TimeConversionIsNotReadWhileTheKernelRewritesIt) {
  perf_event_mmap_page page;
  std::memset(&page, 0, sizeof(page));
  page.lock = 1;  // mid-update: zero and mult not written yet
  page.cap_user_time_zero = 1;
  page.time_mult = 1;
  page.time_shift = 0;
  page.time_zero = 0;
  std::thread kernel([&page] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    page.time_zero = 1ull << 62;
    __atomic_store_n(&page.lock, 2u, __ATOMIC_RELEASE);
  });
  const uint64_t now = EventClockNow(&page, 0);
  kernel.join();
  EXPECT_GE(now, 1ull << 62) << "read the half-written conversion";
}

TEST(PerfClockTest, WithoutTimeZeroTheEventClockIsTheKernelsPerfClock) {
  // A software event's page has no cap_user_time_zero on VMs; the kernel still stamps
  // records with local_clock(), not CLOCK_MONOTONIC. A record it writes between two
  // EventClockNow() reads must fall between them (1 ms of slack for the measurement).
  perf_event_mmap_page page;
  std::memset(&page, 0, sizeof(page));
  absl::StatusOr<int64_t> offset = MeasurePerfClockOffset();
  ASSERT_TRUE(offset.ok()) << offset.status();
  std::printf("perf clock - CLOCK_MONOTONIC here: %lld ns\n", static_cast<long long>(*offset));
  SidebandEventOptions options;
  options.per_cpu = false;
  perf_event_attr attr = DummySidebandAttr(options);
  absl::StatusOr<PerfEvent> event = PerfEvent::Open(attr, 0, -1);
  ASSERT_TRUE(event.ok()) << event.status();
  absl::StatusOr<PerfMmap> ring = PerfMmap::Map(*event, PageSize());
  ASSERT_TRUE(ring.ok()) << ring.status();
  ASSERT_TRUE(event->Enable().ok());
  const uint64_t before = EventClockNow(&page, *offset);
  ASSERT_EQ(prctl(PR_SET_NAME, "clock-probe"), 0);
  const uint64_t after = EventClockNow(&page, *offset);
  ASSERT_TRUE(event->Disable().ok());
  std::string bytes;
  DataRingStats stats;
  ASSERT_TRUE(DataRing(ring->header(), ring->data(), ring->data_size()).Drain(&bytes, &stats).ok());
  RecordFormat format;
  format.sample_type = kSidebandSampleType;
  format.sample_id_all = true;
  auto records = ReadAllRecords(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "probe",
      format);
  ASSERT_TRUE(records.ok()) << records.status();
  uint64_t stamped = 0;
  for (const PerfRecord& r : records->records) {
    if (r.type == PERF_RECORD_COMM) stamped = r.sample_id.time;
  }
  ASSERT_NE(stamped, 0u);
  constexpr uint64_t kSlack = 1000000;
  EXPECT_LE(before, stamped + kSlack);
  EXPECT_GE(after + kSlack, stamped);
}

// Counts the drains of the recording it forwards to.
class CountingTaker : public SnapshotTaker {
 public:
  explicit CountingTaker(SnapshotTaker* inner) : inner_(inner) {}
  absl::Status Snapshot(const std::string& reason) override { return inner_->Snapshot(reason); }
  absl::Status Drain() override {
    drains_++;
    return inner_->Drain();
  }
  std::vector<int> WakeupFds() const override { return inner_->WakeupFds(); }
  RecordCounters counters() const override { return inner_->counters(); }
  int drains() const { return drains_; }

 private:
  SnapshotTaker* inner_;
  int drains_ = 0;
};

TEST_F(PtRecordingTest, ARingWhoseThreadExitedDoesNotSpinTheLoop) {
  options_.record.per_thread = true;
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  factory_.kernel(0).ExitTask();  // the fd polls POLLHUP from now on
  CountingTaker taker(rec->get());
  SessionOptions session_options;
  session_options.handle_signals = false;
  session_options.quiet = true;
  session_options.drain_interval_ms = 10000;
  session_options.duration_s = 0.3;
  RecordSession session(session_options, &taker);
  auto reason = session.Run();
  ASSERT_TRUE(reason.ok()) << reason.status();
  EXPECT_LE(taker.drains(), 3);
}

// Per-CPU attach opens two events per thread per CPU: a default soft RLIMIT_NOFILE (1024)
// runs out long before the hard one. perf raises the soft limit to the hard one
// (rlimit__increase_nofile); so does the recorder, after the launched child is forked.
TEST_F(PtRecordingTest, SoftOpenFileLimitIsRaisedToTheHardOne) {
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 64) {
    GTEST_SKIP() << "hard RLIMIT_NOFILE is " << saved.rlim_max << ": nothing to raise to";
  }
  int open_now = 0;
  for (int fd = 0; fd < 4096; ++fd) open_now += fcntl(fd, F_GETFD) != -1;
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(open_now + 3);  // far fewer than the rings need
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  auto rec = Start();
  rlimit after;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &after), 0);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(after.rlim_cur, saved.rlim_max);
}

TEST_F(PtRecordingTest, FilterByNameReachesTheKernelAsNumbers) {
  // The documented form; the kernel (and the fake) would refuse a symbol name.
  options_.record.filter =
      absl::StrCat("filter ptd_trigger_point@", PTD_BINARY_DIR, "/tests/recorder_pt/ptd-trigger-target");
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  const std::string filter = factory_.requests().at(0).filter;
  EXPECT_THAT(filter, HasSubstr("filter 0x"));
  EXPECT_THAT(filter, ::testing::Not(HasSubstr("ptd_trigger_point")));
}


// Runs `session` on a thread while the test acts as the kernel's producer.
class SessionThread {
 public:
  SessionThread(SnapshotTaker* taker, double duration_s) {
    SessionOptions options;
    options.handle_signals = false;
    options.quiet = true;
    options.drain_interval_ms = 60000;  // only wake-ups drain within the test
    options.duration_s = duration_s;
    session_ = std::make_unique<RecordSession>(options, taker);
    thread_ = std::thread([this] { reason_ = session_->Run(); });
  }
  absl::StatusOr<std::string> Join() {
    thread_.join();
    return reason_;
  }

 private:
  std::unique_ptr<RecordSession> session_;
  std::thread thread_;
  absl::StatusOr<std::string> reason_ = absl::UnknownError("not run");
};

// Whether the reader takes everything `kernel` published within `limit` (the loop has
// only wake-ups to go by: its timer is a minute away). The fake then clears its wakeup.
bool ReaderCatchesUp(FakePtKernel& kernel, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    const uint64_t head = __atomic_load_n(&kernel.header()->aux_head, __ATOMIC_ACQUIRE);
    if (head != 0 && __atomic_load_n(&kernel.header()->aux_tail, __ATOMIC_ACQUIRE) == head) {
      kernel.WriteTrace({});  // the producer's next step
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A thread that only waits, so this process has a second live thread to attach to.
class IdleThread {
 public:
  IdleThread() : thread_([this] {
    tid_ = static_cast<int>(syscall(SYS_gettid));
    std::unique_lock<std::mutex> lock(mu_);
    cv_.notify_all();
    cv_.wait(lock, [this] { return done_; });
  }) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return tid_ != 0; });
  }
  ~IdleThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  int tid() const { return tid_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  int tid_ = 0;
  std::thread thread_;
};

// Attached threads' events are opened disabled (nothing of theirs precedes the mappings
// synthesized from /proc) and run once enabled; a truncation stops only the event that
// was writing, and the recorder's read enables it again.
TEST_F(PtRecordingTest, AttachedEventsRunOnlyOnceEnabledAndATruncationStopsOnlyItsEvent) {
  IdleThread other;
  const int self = options_.self_tids.front();
  options_.self_tids.push_back(other.tid());
  options_.record.snapshot = false;
  options_.record.per_thread = false;
  size_t written_before_enable = 1;
  factory_.on_open = [&](FakePtKernel& k) {
    if (k.options().cpu == 0) written_before_enable = k.WriteTrace(testing::TraceBytes(100, 1));
  };
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(written_before_enable, 0u) << "opened disabled (attr.disabled)";
  FakePtKernel& k = factory_.kernel(0);
  EXPECT_EQ(factory_.requests().at(0).attr.disabled, 1u);
  EXPECT_TRUE(k.pt_enabled(self));
  EXPECT_TRUE(k.pt_enabled(other.tid()));
  k.RunTask(other.tid());
  k.WriteTrace(testing::TraceBytes(5 * 4096, 2));  // more than the 4-page ring holds
  EXPECT_FALSE(k.pt_enabled(other.tid())) << "the writing event is disabled (pending_disable)";
  EXPECT_TRUE(k.pt_enabled(self)) << "the ring's other events are not";
  ASSERT_TRUE((*rec)->Drain().ok());
  EXPECT_TRUE(k.pt_enabled(other.tid())) << "enabled again after the read";
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
}

// A per-CPU ring holds the events of several threads; the one polled first may hang up
// (its thread exited) while the others still write: their fds wake the loop.
TEST_F(PtRecordingTest, APerCpuRingWakesTheLoopAfterItsFirstThreadExited) {
  IdleThread other;
  const int self = options_.self_tids.front();
  options_.self_tids.push_back(other.tid());
  options_.record.snapshot = false;
  options_.record.per_thread = false;
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  FakePtKernel& k = factory_.kernel(0);
  ASSERT_EQ(k.poll_fds().size(), 2u);
  k.ExitTask(self);  // its event polls POLLHUP from now on; the ring's other does not
  SessionThread session(rec->get(), 3.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the loop sees the HUP
  k.RunTask(other.tid());
  k.WriteTrace(testing::TraceBytes(k.options().aux_size / 4, 3));  // the watermark
  EXPECT_EQ(k.wakeups(), 1u);
  EXPECT_TRUE(ReaderCatchesUp(k, std::chrono::milliseconds(2000)))
      << "the other thread's wake-up did not reach the loop";
  auto reason = session.Join();
  ASSERT_TRUE(reason.ok()) << reason.status();
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("duration", {}, &meta).ok());
}

// Rings opened by a drain (here a thread created while recording, per-thread mode) join
// the poll set: their wake-ups drain them long before the loop's timer.
TEST_F(PtRecordingTest, RingsOpenedWhileRecordingWakeTheLoop) {
  SleepingChild target;
  ASSERT_GT(target.pid(), 0);
  options_.record.snapshot = false;
  FollowRun run(options_, target.pid(), /*per_thread=*/true, /*follow=*/false);
  ASSERT_NE(run.rec, nullptr);
  SessionThread session(run.rec.get(), 3.0);  // its first drain reads the FORK
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (run.factory.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(run.factory.size(), 2u) << "no ring for the new thread";
  FakePtKernel& k = run.factory.kernel(1);
  ASSERT_TRUE(k.pt_enabled());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the loop polls it
  k.WriteTrace(testing::TraceBytes(k.options().aux_size / 4, 4));
  EXPECT_EQ(k.wakeups(), 1u);
  EXPECT_TRUE(ReaderCatchesUp(k, std::chrono::milliseconds(2000)))
      << "the new ring's wake-up did not reach the loop";
  auto reason = session.Join();
  ASSERT_TRUE(reason.ok()) << reason.status();
  run.Finish();
}

}  // namespace
}  // namespace ptd::pt
