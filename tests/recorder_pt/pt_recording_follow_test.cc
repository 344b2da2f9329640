// Following new tasks: rings for the threads and children the sideband reports, per
// thread and per CPU, with and without --no-follow.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tests/recorder_pt/pt_recording_fixture.h"

namespace ptd::pt {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using testing::FakePtKernel;

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
  EXPECT_THAT(meta.notes, Contains(::testing::AllOf(HasSubstr("thread 4000001 not traced"),
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
  EXPECT_THAT(meta.notes, ::testing::Not(Contains(HasSubstr("not traced"))));
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
    EXPECT_THAT(meta.notes, ::testing::Not(Contains(HasSubstr(absl::StrCat("process ", kChild)))));
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

}  // namespace
}  // namespace ptd::pt
