// The trigger policy every backend shares: which entry or return fires, per thread, and
// the option checks made before any work.
#include "recorder/session/trigger_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <optional>

#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;

TriggerSpec SlowerThan(uint64_t ns, uint64_t after = 1) {
  TriggerSpec spec;
  spec.symbol = "handle_request";
  spec.slower_than_ns = ns;
  spec.after = after;
  return spec;
}

TEST(TriggerPolicyTest, EntryTriggerFiresOnTheNthEntryOverAllThreads) {
  TriggerSpec spec;
  spec.symbol = "f";
  spec.after = 3;
  TriggerPolicy policy(spec);
  EXPECT_FALSE(policy.OnEntry(10, 10, 0x7000, 100));
  EXPECT_FALSE(policy.OnEntry(10, 11, 0x9000, 110));
  std::optional<TriggerFiring> fired = policy.OnEntry(10, 11, 0x9000, 120);
  ASSERT_TRUE(fired);
  EXPECT_EQ(fired->tid, 11);
  EXPECT_EQ(fired->hit, 3u);
  EXPECT_EQ(fired->entry_ns, 120u);
  EXPECT_EQ(fired->return_ns, 0u);
  // Fired once, without --multi-snapshot.
  EXPECT_FALSE(policy.OnEntry(10, 10, 0x7000, 130));
  EXPECT_EQ(policy.firings().size(), 1u);
}

TEST(TriggerPolicyTest, RepeatFiresOnEveryHitFromTheNth) {
  TriggerSpec spec;
  spec.symbol = "f";
  spec.after = 2;
  spec.repeat = true;
  TriggerPolicy policy(spec);
  EXPECT_FALSE(policy.OnEntry(1, 1, 0x1000, 1));
  EXPECT_TRUE(policy.OnEntry(1, 1, 0x1000, 2));
  EXPECT_TRUE(policy.OnEntry(1, 1, 0x1000, 3));
  EXPECT_EQ(policy.firings().size(), 2u);
}

TEST(TriggerPolicyTest, SlowReturnFiresWithItsEntryAndReturnTimes) {
  TriggerPolicy policy(SlowerThan(1000));
  // Entry with the return address at sp 0x7f00; inside the call the stack is lower.
  EXPECT_FALSE(policy.OnEntry(5, 6, 0x7f00, 10'000));
  EXPECT_FALSE(policy.OnStack(6, 0x7e00, 10'100));
  EXPECT_FALSE(policy.OnStack(6, 0x7f00, 10'200));  // still at the return address: not returned
  EXPECT_FALSE(policy.OnStack(7, 0x8000, 10'300));  // another thread
  EXPECT_EQ(policy.returns(), 0u);
  // A fast call: returned 500 ns later.
  EXPECT_FALSE(policy.OnStack(6, 0x7f08, 10'500));
  EXPECT_EQ(policy.returns(), 1u);
  EXPECT_FALSE(policy.OnStack(6, 0x7f08, 10'600));  // nothing open any more
  EXPECT_EQ(policy.returns(), 1u);
  // A slow one.
  EXPECT_FALSE(policy.OnEntry(5, 6, 0x7f00, 20'000));
  std::optional<TriggerFiring> fired = policy.OnStack(6, 0x7f08, 22'000);
  ASSERT_TRUE(fired);
  EXPECT_EQ(fired->pid, 5);
  EXPECT_EQ(fired->tid, 6);
  EXPECT_EQ(fired->hit, 1u);
  EXPECT_EQ(fired->entry_ns, 20'000u);
  EXPECT_EQ(fired->return_ns, 22'000u);
  EXPECT_EQ(policy.returns(), 2u);
  EXPECT_EQ(policy.slowest_ns(), 2000u);
  EXPECT_THAT(policy.Describe(0x401000), HasSubstr("2 returns"));
}

TEST(TriggerPolicyTest, TriggerAfterCountsOnlySlowCalls) {
  TriggerPolicy policy(SlowerThan(100, 2));
  for (uint64_t t = 0; t < 5; ++t) {  // five fast calls
    policy.OnEntry(1, 1, 0x1000, t * 1000);
    EXPECT_FALSE(policy.OnStack(1, 0x1008, t * 1000 + 10));
  }
  policy.OnEntry(1, 1, 0x1000, 10'000);
  EXPECT_FALSE(policy.OnStack(1, 0x1008, 10'500));  // first slow one
  policy.OnEntry(1, 1, 0x1000, 20'000);
  std::optional<TriggerFiring> fired = policy.OnStack(1, 0x1008, 20'200);
  ASSERT_TRUE(fired);
  EXPECT_EQ(fired->hit, 2u);
  EXPECT_EQ(fired->entry_ns, 20'000u);
}

TEST(TriggerPolicyTest, ThreadsAreMatchedSeparatelyAndRecursionByStackDepth) {
  TriggerPolicy policy(SlowerThan(1000));
  policy.OnEntry(1, 1, 0x8000, 0);      // outer call, thread 1
  policy.OnEntry(1, 1, 0x7000, 100);    // recursive inner call
  policy.OnEntry(1, 2, 0x5000, 200);    // thread 2
  EXPECT_FALSE(policy.OnStack(1, 0x7008, 300));   // inner returns fast
  EXPECT_FALSE(policy.OnStack(2, 0x5008, 400));   // thread 2 fast
  std::optional<TriggerFiring> fired = policy.OnStack(1, 0x8008, 5000);  // outer slow
  ASSERT_TRUE(fired);
  EXPECT_EQ(fired->tid, 1);
  EXPECT_EQ(fired->entry_ns, 0u);
}

TEST(TriggerPolicyTest, StackUnwoundPastSeveralCallsEndsThemAll) {
  TriggerPolicy policy(SlowerThan(1000));
  policy.OnEntry(1, 1, 0x8000, 0);
  policy.OnEntry(1, 1, 0x7000, 10);
  // A longjmp past both ends both; the inner one is the first to qualify.
  std::optional<TriggerFiring> fired = policy.OnStack(1, 0x9000, 2010);
  ASSERT_TRUE(fired);
  EXPECT_EQ(fired->entry_ns, 10u);
  EXPECT_EQ(policy.returns(), 2u);
}

TEST(TriggerPolicyTest, SpecCheckRejectsNonsense) {
  RecordOptions options;
  options.trigger_symbol = "f";
  options.trigger_slower_than = "5 parsecs";
  absl::StatusOr<TriggerSpec> spec = TriggerSpecOf(options);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("--trigger-slower-than"));
  options.trigger_slower_than = "0ms";
  EXPECT_FALSE(TriggerSpecOf(options).ok());
  options.trigger_slower_than = "-5ms";
  EXPECT_FALSE(TriggerSpecOf(options).ok());
  options.trigger_slower_than = "2.5ms";
  spec = TriggerSpecOf(options);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->slower_than_ns, 2'500'000u);

  RecordOptions no_symbol;
  no_symbol.trigger_after = 3;
  EXPECT_FALSE(TriggerSpecOf(no_symbol).ok());
  no_symbol.trigger_after = 0;
  no_symbol.trim = true;
  EXPECT_FALSE(TriggerSpecOf(no_symbol).ok());

  options.trim = true;
  options.multi_snapshot = true;
  EXPECT_FALSE(TriggerSpecOf(options).ok());
}

TEST(TriggerPolicyTest, SymbolMissingFromTheProgramIsAnErrorBeforeAnyWork) {
  RecordOptions options;
  options.command = {"/proc/self/exe"};
  options.trigger_symbol = "no_such_function_anywhere";
  absl::StatusOr<TriggerSpec> spec = TriggerSpecOf(options);
  ASSERT_TRUE(spec.ok());
  absl::Status missing = CheckTriggerSymbol(options, *spec);
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  EXPECT_THAT(std::string(missing.message()), HasSubstr("no_such_function_anywhere"));
  EXPECT_THAT(std::string(missing.message()), HasSubstr("not found in"));
  // A function the test binary has.
  options.trigger_symbol = "main";
  EXPECT_TRUE(CheckTriggerSymbol(options, *TriggerSpecOf(options)).ok());
  // A library not loaded yet cannot be checked.
  options.trigger_symbol = "whatever@libnotloaded.so";
  EXPECT_TRUE(CheckTriggerSymbol(options, *TriggerSpecOf(options)).ok());
  // Attached: looked up in the running process.
  RecordOptions attach;
  attach.pids = {getpid()};
  attach.trigger_symbol = "no_such_function_anywhere";
  EXPECT_FALSE(CheckTriggerSymbol(attach, *TriggerSpecOf(attach)).ok());
  // Several processes (or a cgroup): each has the symbol at its own address.
  attach.pids = {getpid(), getppid()};
  attach.trigger_symbol = "main";
  absl::Status several = CheckTriggerSymbol(attach, *TriggerSpecOf(attach));
  EXPECT_EQ(several.code(), absl::StatusCode::kInvalidArgument) << several;
  EXPECT_THAT(std::string(several.message()), HasSubstr("one target process"));
}

}  // namespace
}  // namespace ptd
