// PtRecording's events, rings, snapshots and drains over the fake kernel: what a real
// kernel would do to the recorder's choices, and the errors it reports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "recorder/sideband/data_ring.h"
#include "recorder/sideband/sideband_recorder.h"
#include "sideband/record_builder.h"
#include "tests/recorder_pt/pt_recording_fixture.h"

namespace ptd::pt {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::FakePtKernel;

std::vector<uint8_t> Comm(const char* name) {
  PerfRecord comm;
  comm.body = CommRecord{77, 78, name};
  return EncodeRecord(comm, RecordFormat{});
}

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

}  // namespace
}  // namespace ptd::pt
