#pragma once
// PtRecordingTest: a PtRecording over the fake kernel and a fake sysfs and /proc,
// self-tracing so that no process is needed; SleepingChild, a process to attach to; and
// FollowRun, a recording attached to one whose fake rings report new tasks.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "recorder/pt/pt_recording.h"
#include "recorder/sideband/sideband_recorder.h"
#include "sideband/record_builder.h"
#include "sideband/record_reader.h"
#include "tests/recorder_pt/fake_ring_factory.h"
#include "tests/recorder_pt/fake_sysfs.h"
#include "tests/testing/test_util.h"

namespace ptd::pt {

class PtRecordingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakePtSysfs().WriteTo(sysfs_.path());
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
  testing::FakeRingFactory factory_;
  PtRecordingOptions options_;
  std::unique_ptr<TraceDirWriter> dir_;
};

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

// A PERF_RECORD_FORK as the kernel writes it into the ring of the creating task
// (perf_event_task_output: ppid/ptid are current's, pid/tid the new task's): pid == ppid
// for a new thread, pid != ppid for a child process.
inline void WriteFork(testing::FakePtKernel& k, uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid) {
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
inline constexpr uint32_t kNewThread = 4000001;
inline constexpr uint32_t kChild = 4000002;
inline constexpr uint32_t kChildThread = 4000003;

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
    factory.on_open = [this, target](testing::FakePtKernel& k) {
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

  testing::FakeRingFactory factory;
  ptd::testing::TempDir out;
  std::unique_ptr<TraceDirWriter> dir;
  std::unique_ptr<PtRecording> rec;
  bool forks_written = false;
};

}  // namespace ptd::pt
