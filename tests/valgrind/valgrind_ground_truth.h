#pragma once
// Independent checks for traces recorded under Valgrind: Valgrind's own tools run the same
// program on the same virtual CPU (so glibc picks the same ifuncs) with the same
// translation options. lackey counts instructions (every rep iteration: an upper bound of
// PT's count), callgrind counts calls per function. And what our decoder makes of a trace:
// slices per function name, errors, instructions.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "common/trace_meta.h"
#include "recorder/session/emulated_record_summary.h"
#include "recorder/session/record_options.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {

// The options every Valgrind run of the tests shares with the recorder's (see
// recorder/valgrind/valgrind_install.cc): blocks cut at every branch, no loop unrolling,
// no exit-time clean-up code.
std::vector<std::string> ValgrindToolCommand(const std::string& tool, const std::vector<std::string>& extra,
                                             const std::vector<std::string>& command);

// lackey --basic-counts: "guest instrs".
absl::StatusOr<uint64_t> LackeyInstructions(const std::vector<std::string>& command);

// callgrind: calls per function name (summed over callers, all processes of the run).
absl::StatusOr<std::map<std::string, uint64_t>> CallgrindCalls(const std::vector<std::string>& command,
                                                               const std::string& work_dir);

// A slice of the function DecodeForTest was asked to watch.
struct WatchedSlice {
  int tid = -1;
  uint64_t begin = 0;
  uint64_t end = 0;
  bool returned = false;  // ended before its thread's trace did (not closed by the end)
};

struct DecodedTrace {
  uint64_t instructions = 0;
  uint64_t errors = 0;
  std::map<std::string, uint64_t> calls;  // slices begun per function name
  std::vector<std::string> error_details;
  std::map<int, std::string> threads;     // tid -> process name
  std::map<int, std::map<std::string, uint64_t>> thread_calls;  // tid -> slices begun per function
  std::map<int, uint64_t> thread_errors;  // tid -> decode errors
  std::vector<WatchedSlice> watched;      // slices of `watch`, in the order they ended
  std::vector<std::string> warnings;      // the decoder's
  // Per function name: the names of the slices its slices began in ("" at the top).
  std::map<std::string, std::map<std::string, uint64_t>> parents;
  uint64_t max_depth = 0;   // deepest nesting of slices, over all threads
  uint64_t unbalanced = 0;  // Ends with no open slice, and slices left open at the end
};

// `cycles_axis`: time is the CYC packets' count (the emulators' clock, exact by
// construction) instead of the default time axis.
absl::StatusOr<DecodedTrace> DecodeForTest(const std::string& trace_dir, const std::string& watch = "",
                                           bool cycles_axis = false);

// A trace recorded by an emulation backend and what DecodeForTest made of it.
struct DecodedRecording {
  std::string dir;
  TraceMeta meta;
  EmulatedRecordSummary summary;
  DecodedTrace decoded;
};

// `record --emulate=EMULATOR -q -o DIR/trace.dir -- command`: what a test's recording
// starts from.
RecordOptions EmulatedRecordOptions(const std::vector<std::string>& command, const std::string& dir,
                                    const std::string& emulator);

// Records with `record` (RecordEmulated, RecordValgrind) and reads meta.json back (not
// decoded); then also decodes, watching `watch`. What fails is a test failure, and leaves
// the rest empty (`dir` empty: the recording failed).
using EmulatedRecorder = std::function<absl::StatusOr<EmulatedRecordSummary>(const RecordOptions&)>;
DecodedRecording RecordForTest(const EmulatedRecorder& record, const RecordOptions& options);
DecodedRecording RecordAndDecodeForTest(const EmulatedRecorder& record, const RecordOptions& options,
                                        const std::string& watch = "");

// `command` recorded under the Valgrind backend into DIR/trace.dir (quiet), then decoded;
// a decode error is a test failure.
DecodedRecording RecordUnderValgrindForTest(const std::vector<std::string>& command, const std::string& dir);

// Marks the running test skipped, saying why, when the Valgrind backend cannot record on
// this machine (call from SetUp or the test; code after it checks IsSkipped()).
void SkipUnlessValgrindRecords();

// The fixture of a test that records under Valgrind (`Base`: ::testing::Test or a
// TestWithParam): skipped, saying why, where Valgrind cannot record; recordings go to tmp_.
template <typename Base = ::testing::Test>
class ValgrindRecordingTest : public Base {
 protected:
  void SetUp() override { SkipUnlessValgrindRecords(); }
  TempDir tmp_;
};

// The calls of `function` in a map of calls per function (0 when absent).
uint64_t CallsOf(const std::map<std::string, uint64_t>& calls, const std::string& function);

}  // namespace ptd::testing
