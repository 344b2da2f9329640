// SidebandRecorder on this test process's own threads (real kernel, dummy events).
#include "recorder/sideband/sideband_recorder.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <variant>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "sideband/record_reader.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

// Per-thread mode follows a thread only once AddThread() opened its ring; the COMM the
// thread makes afterwards must be in sideband/tid<N>.data, written by the drain thread.
TEST(SidebandRecorderTest, PerThreadModeRecordsAThreadAddedLater) {
  testing::TempDir tmp;
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(tmp.Sub("t.dir"), false);
  ASSERT_TRUE(dir.ok());
  SidebandRecorderOptions options;
  options.per_cpu = false;
  options.data_size = 16 << 10;
  options.enable_on_exec = true;  // as after a launch: AddThread must still enable
  absl::StatusOr<std::unique_ptr<SidebandRecorder>> rec =
      SidebandRecorder::Open({static_cast<int>(gettid())}, options, *dir);
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_TRUE((*rec)->Start().ok());

  std::mutex mu;
  std::condition_variable cv;
  int worker_tid = 0;
  bool added = false;
  std::thread worker([&] {
    {
      std::unique_lock<std::mutex> lock(mu);
      worker_tid = static_cast<int>(gettid());
      cv.notify_all();
      cv.wait(lock, [&] { return added; });
    }
    prctl(PR_SET_NAME, "ptd-added");
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return worker_tid != 0; });
  }
  ASSERT_TRUE((*rec)->AddThread(worker_tid).ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    added = true;
    cv.notify_all();
  }
  worker.join();
  ASSERT_TRUE((*rec)->Stop().ok());

  std::vector<SidebandFile> files = (*rec)->Files();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[1].tid, worker_tid);
  EXPECT_EQ(files[1].cpu, -1);
  EXPECT_EQ(files[1].file, "sideband/tid" + std::to_string(worker_tid) + ".data");
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(dir->FilePath(files[1].file));
  ASSERT_TRUE(bytes.ok());
  absl::StatusOr<RecordList> list = ReadAllRecords(*bytes, files[1].file, RecordFormat{});
  ASSERT_TRUE(list.ok()) << list.status();
  bool saw = false;
  for (const PerfRecord& r : list->records) {
    auto* c = std::get_if<CommRecord>(&r.body);
    saw |= c != nullptr && c->comm == "ptd-added" && c->tid == static_cast<uint32_t>(worker_tid);
  }
  EXPECT_TRUE(saw);
  EXPECT_EQ((*rec)->TotalStats().lost_records, 0u);
}

TEST(SidebandRecorderTest, OnlineCpusListsThisMachinesCpus) {
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_EQ(static_cast<long>(cpus->size()), sysconf(_SC_NPROCESSORS_ONLN));
}

}  // namespace
}  // namespace ptd
