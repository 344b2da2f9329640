// The rings' sizes: perf's defaults under and above the locked-memory limit, and what
// the fake kernel is asked for.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "recorder/pt/ring_sizes.h"
#include "recorder/sideband/sideband_recorder.h"
#include "tests/recorder_pt/pt_recording_fixture.h"

namespace ptd::pt {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace ptd::pt
