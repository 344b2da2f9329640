// Process shapes people's programs have, recorded under Valgrind and checked against
// their source (tests/conformance/process_shapes.c): 64 threads, a fork without exec, a
// posix_spawn. Each decodes without error, every thread and process is there, and each
// makes the calls its source makes.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

class ProcessShapesTest : public ValgrindRecordingTest<> {
 protected:
  DecodedRecording Record(const std::vector<std::string>& args) {
    std::vector<std::string> command = {PTD_PROCESS_SHAPES};
    command.insert(command.end(), args.begin(), args.end());
    native_ = RunCommand(command);
    return RecordUnderValgrindForTest(command, tmp_.path());
  }
  // The tids whose calls include `function`, with how many calls each made.
  static std::map<int, uint64_t> ThreadsCalling(const DecodedRecording& rec, const std::string& function) {
    std::map<int, uint64_t> threads;
    for (const auto& [tid, calls] : rec.decoded.thread_calls) {
      auto found = calls.find(function);
      if (found != calls.end()) threads[tid] = found->second;
    }
    return threads;
  }
  CommandResult native_;
};

TEST_F(ProcessShapesTest, SixtyFourThreadsEachMakeTheirCalls) {
  constexpr int kThreads = 64;
  constexpr uint64_t kCalls = 100;
  const DecodedRecording rec = Record({"threads", absl::StrCat(kThreads), absl::StrCat(kCalls)});
  ASSERT_FALSE(rec.dir.empty());
  EXPECT_EQ(rec.summary.exit_status, native_.exit_code);
  EXPECT_EQ(rec.decoded.errors, 0u);
  EXPECT_EQ(rec.decoded.threads.size(), static_cast<size_t>(kThreads + 1));
  const std::map<int, uint64_t> workers = ThreadsCalling(rec, "thread_work");
  ASSERT_EQ(workers.size(), static_cast<size_t>(kThreads));
  for (const auto& [tid, calls] : workers) EXPECT_EQ(calls, kCalls) << "thread " << tid;
}

TEST_F(ProcessShapesTest, ForkWithoutExecRecordsBothProcesses) {
  const DecodedRecording rec = Record({"fork", "30", "20"});
  ASSERT_FALSE(rec.dir.empty());
  EXPECT_EQ(rec.summary.exit_status, native_.exit_code);
  EXPECT_EQ(rec.decoded.errors, 0u);
  const std::map<int, uint64_t> children = ThreadsCalling(rec, "child_work");
  const std::map<int, uint64_t> parents = ThreadsCalling(rec, "parent_work");
  ASSERT_EQ(children.size(), 1u);
  ASSERT_EQ(parents.size(), 1u);
  EXPECT_EQ(children.begin()->second, 30u);
  EXPECT_EQ(parents.begin()->second, 20u);
  EXPECT_NE(children.begin()->first, parents.begin()->first) << "the child is its own process";
}

TEST_F(ProcessShapesTest, PosixSpawnRecordsTheSpawnedProgram) {
  const DecodedRecording rec = Record({"spawn", PTD_PROCESS_SHAPES, "fork", "5", "4"});
  ASSERT_FALSE(rec.dir.empty());
  EXPECT_EQ(native_.exit_code, 0);
  EXPECT_EQ(rec.summary.exit_status, native_.exit_code);
  EXPECT_EQ(rec.decoded.errors, 0u);
  // The spawned program (and the child it forks) made their calls: spawn, exec and fork
  // were all followed.
  EXPECT_EQ(CallsOf(rec.decoded.calls, "child_work"), 5u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "parent_work"), 4u);
  EXPECT_EQ(rec.decoded.threads.size(), 3u);  // the spawner, the spawned program, its child
}

}  // namespace
}  // namespace ptd::testing
