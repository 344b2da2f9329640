// record --emulate=ptrace with the triggers of recorder/session/trigger_policy.h on a real
// two-thread program (tests/programs/prog_slow_call.c): --trigger-slower-than catches the
// one slow call (in the second thread) whole, --trigger-after picks the Nth entry,
// --trim drops what came before the call. Checked by decoding with the decoder.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "recorder/emulate/emulated_recorder.h"
#include "recorder/emulate/ground_truth.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

constexpr char kSlowFunction[] = "handle_request";
// The 7th call sleeps 300 ms; a single-stepped fast call takes a few ms at most.
constexpr uint64_t kThresholdNs = 100'000'000;

struct Recorded : DecodedRecording {
  std::vector<GroundTruthThread> truth;  // what the stepper saw
};

RecordOptions SlowCallOptions(const TempDir& tmp) {
  // "sleep": the slow call sleeps (single-stepping a long loop would take minutes).
  RecordOptions options = EmulatedRecordOptions({Program("ptd_prog_slow_call"), "sleep"}, tmp.path(), "ptrace");
  options.trigger_symbol = kSlowFunction;
  return options;
}

Recorded Record(const TempDir& tmp, void (*tweak)(RecordOptions&)) {
  RecordOptions options = SlowCallOptions(tmp);
  options.ground_truth_path = tmp.Sub("truth");
  tweak(options);
  Recorded rec;
  static_cast<DecodedRecording&>(rec) = RecordAndDecodeForTest(RecordEmulated, options, kSlowFunction);
  if (rec.dir.empty()) return rec;
  absl::StatusOr<std::vector<GroundTruthThread>> truth = LoadGroundTruth(options.ground_truth_path);
  EXPECT_TRUE(truth.ok()) << truth.status();
  if (truth.ok()) rec.truth = *truth;
  return rec;
}

uint64_t Calls(const DecodedTrace& decoded) {
  auto it = decoded.calls.find(kSlowFunction);
  return it == decoded.calls.end() ? 0 : it->second;
}

TEST(PtraceTriggerTest, SlowerThanCatchesTheSlowCallOfTheSecondThreadWhole) {
  TempDir tmp;
  Recorded rec = Record(tmp, [](RecordOptions& o) { o.trigger_slower_than = "100ms"; });
  EXPECT_EQ(rec.summary.end_reason, "trigger");
  ASSERT_TRUE(rec.meta.trigger.has_value());
  const TriggerPoint& point = *rec.meta.trigger;
  EXPECT_EQ(point.hit, 1u);
  EXPECT_EQ(point.slower_than_ns, kThresholdNs);
  ASSERT_FALSE(rec.meta.pids.empty());
  EXPECT_NE(point.tid, rec.meta.pids[0]);
  EXPECT_GT(point.return_ns - point.entry_ns, kThresholdNs);
  EXPECT_EQ(rec.decoded.errors, 0u);
  // The worker's calls 1..7, the 7th with its return; main's calls never ran.
  EXPECT_EQ(Calls(rec.decoded), 7u);
  ASSERT_EQ(rec.decoded.watched.size(), 7u);
  const WatchedSlice& slow = rec.decoded.watched.back();
  EXPECT_EQ(slow.tid, point.tid);
  EXPECT_GT(slow.end - slow.begin, kThresholdNs);
  // The recording stopped right after the return: the worker's last event is that
  // return, and the trace holds every instruction the stepper retired.
  EXPECT_EQ(rec.decoded.instructions, rec.summary.instructions);
  bool found = false;
  for (const GroundTruthThread& thread : rec.truth) {
    if (thread.tid != point.tid) continue;
    found = true;
    GroundTruthTag last = GroundTruthTag::kEnd;
    for (const GroundTruthRecord& event : thread.events) {
      if (event.type != GroundTruthTag::kEnd) last = event.type;  // kEnd: the detach
    }
    EXPECT_EQ(last, GroundTruthTag::kReturn);
  }
  EXPECT_TRUE(found);
}

TEST(PtraceTriggerTest, TriggerAfterFiresOnTheNthEntryInTheSecondThread) {
  TempDir tmp;
  Recorded rec = Record(tmp, [](RecordOptions& o) { o.trigger_after = 4; });
  EXPECT_EQ(rec.summary.end_reason, "trigger");
  ASSERT_TRUE(rec.meta.trigger.has_value());
  EXPECT_EQ(rec.meta.trigger->hit, 4u);
  EXPECT_EQ(rec.meta.trigger->return_ns, 0u);
  ASSERT_FALSE(rec.meta.pids.empty());
  EXPECT_NE(rec.meta.trigger->tid, rec.meta.pids[0]);
  EXPECT_EQ(Calls(rec.decoded), 4u);
}

TEST(PtraceTriggerTest, TrimKeepsTheSlowCallAndMarksWhatWasCut) {
  TempDir tmp;
  Recorded rec = Record(tmp, [](RecordOptions& o) {
    o.trigger_slower_than = "100ms";
    o.trim = true;
  });
  ASSERT_TRUE(rec.meta.trigger.has_value());
  EXPECT_EQ(rec.meta.trigger->trimmed_from_ns, rec.meta.trigger->entry_ns);
  EXPECT_EQ(rec.decoded.errors, 0u);
  ASSERT_FALSE(rec.decoded.watched.empty());
  EXPECT_GT(rec.decoded.watched.back().end - rec.decoded.watched.back().begin, kThresholdNs);
  // The dynamic loader's start-up is gone.
  EXPECT_LT(rec.decoded.instructions, rec.summary.instructions / 2);
}

TEST(PtraceTriggerTest, NonsenseIsRefusedBeforeTheProgramRuns) {
  TempDir tmp;
  RecordOptions options = SlowCallOptions(tmp);
  options.trigger_symbol = "handle_reqest";
  absl::StatusOr<EmulatedRecordSummary> missing = RecordEmulated(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("handle_reqest"), std::string::npos) << missing.status();
  options.trigger_symbol = kSlowFunction;
  options.trigger_slower_than = "fast";
  absl::StatusOr<EmulatedRecordSummary> bad_duration = RecordEmulated(options);
  ASSERT_FALSE(bad_duration.ok());
  EXPECT_NE(bad_duration.status().message().find("--trigger-slower-than"), std::string::npos);
  EXPECT_FALSE(PathExists(options.output_dir));
}

}  // namespace
}  // namespace ptd::testing
