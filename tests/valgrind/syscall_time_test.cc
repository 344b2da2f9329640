// Under the Valgrind backend a system call lasts as long as it took (the tool times it,
// recorder/valgrind/tool: VGPT_SYSCALL_TIME), on the default virtual clock and on
// --time=wall alike: a call that sleeps 300 ms is slow, and --trigger-slower-than catches
// it in the thread that slept while the other waited in pthread_join
// (tests/programs/prog_slow_call.c). A fixed cost per call made it 1 us long.
#include <string>

#include "common/trace_meta.h"
#include "gtest/gtest.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

constexpr uint64_t kSleepNs = 300'000'000;  // the 7th call's nanosleep

class SyscallTimeTest : public ValgrindRecordingTest<::testing::TestWithParam<bool>> {
 protected:
  // ptd_prog_slow_call sleep, recorded until a call of handle_request longer than 250 ms
  // returns; the clock is the wall clock with GetParam().
  DecodedRecording RecordTheSlowCall() {
    RecordOptions options = EmulatedRecordOptions({Program("ptd_prog_slow_call"), "sleep"}, tmp_.path(), "valgrind");
    options.wall_clock = GetParam();
    options.trigger_symbol = "handle_request";
    options.trigger_slower_than = "250ms";
    return RecordForTest(RecordValgrind, options);
  }
};

TEST_P(SyscallTimeTest, ACallThatSleepsLastsAsLongAsItSlept) {
  const DecodedRecording rec = RecordTheSlowCall();
  ASSERT_FALSE(rec.dir.empty());
  ASSERT_TRUE(rec.meta.trigger.has_value()) << "no call was slower than 250 ms: the sleep did not count";
  const TriggerPoint& fired = *rec.meta.trigger;
  EXPECT_EQ(fired.hit, 1u);  // the 7th call, the only slow one
  EXPECT_NE(fired.tid, fired.pid) << "not the worker thread";
  const uint64_t took = fired.return_ns - fired.entry_ns;
  EXPECT_GE(took, kSleepNs);
  // It slept 300 ms and ran a few hundred instructions (a hang guard, not a speed check).
  EXPECT_LT(took, kSleepNs + 5'000'000'000ull);
}

INSTANTIATE_TEST_SUITE_P(Clocks, SyscallTimeTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Wall" : "Virtual"; });

}  // namespace
}  // namespace ptd::testing
