// Real programs recorded with the Valgrind backend, decoded by our decoder, and checked
// against independent ground truth: callgrind's calls per function and lackey's
// instruction count (same virtual CPU, same translation options), and counts known from
// the programs' sources.
#include "recorder/valgrind/valgrind_recorder.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <thread>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd {
namespace {

using ::ptd::testing::CallgrindCalls;
using ::ptd::testing::DecodedTrace;
using ::ptd::testing::DecodeForTest;
using ::ptd::testing::LackeyInstructions;
using ::ptd::testing::RunCommand;
using ::ptd::testing::TempDir;
using ::ptd::testing::WatchedSlice;

std::string Program(const std::string& name) { return std::string(PTD_BINARY_DIR) + "/tests/programs/" + name; }

#define PTD_REQUIRE_VALGRIND()                                   \
  do {                                                           \
    std::string why;                                             \
    if (!ValgrindAvailable(&why)) GTEST_SKIP() << why;           \
  } while (0)

struct Recorded {
  std::string dir;
  TraceMeta meta;
  EmulatedRecordSummary summary;
  DecodedTrace decoded;
};

// `watch`: a function whose slices the decode lists (DecodedTrace::watched).
Recorded RecordAndDecode(const TempDir& tmp, const std::vector<std::string>& command,
                         const std::function<void(RecordOptions&)>& tweak = nullptr,
                         const std::string& watch = "") {
  RecordOptions options;
  options.command = command;
  options.output_dir = tmp.Sub("trace.dir");
  options.emulate = true;
  options.emulator = "valgrind";
  options.quiet = true;
  if (tweak) tweak(options);
  Recorded rec;
  absl::StatusOr<EmulatedRecordSummary> summary = RecordValgrind(options);
  EXPECT_TRUE(summary.ok()) << summary.status();
  if (!summary.ok()) return rec;
  rec.summary = *summary;
  rec.dir = options.output_dir;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(rec.dir);
  EXPECT_TRUE(meta.ok()) << meta.status();
  if (meta.ok()) rec.meta = *meta;
  absl::StatusOr<DecodedTrace> decoded = DecodeForTest(rec.dir, watch);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  if (decoded.ok()) rec.decoded = *decoded;
  return rec;
}

// Decoding the trace finds exactly what the recorder put in, with no error.
void ExpectCleanDecode(const Recorded& rec) {
  EXPECT_EQ(rec.decoded.errors, 0u) << (rec.decoded.error_details.empty() ? "" : rec.decoded.error_details[0]);
  EXPECT_EQ(rec.decoded.instructions, rec.summary.instructions);
  EXPECT_GT(rec.summary.instructions, 100000u);  // the dynamic loader alone runs this much
  EXPECT_EQ(rec.meta.mode, TraceMode::kEmulated);
  EXPECT_EQ(rec.meta.emulator, "valgrind");
}

uint64_t Calls(const std::map<std::string, uint64_t>& calls, const std::string& name) {
  auto it = calls.find(name);
  return it == calls.end() ? 0 : it->second;
}

TEST(ValgrindRecorderTest, CallsPerFunctionEqualCallgrindsAndTheSource) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  const std::vector<std::string> command = {Program("ptd_prog_calls")};
  Recorded rec = RecordAndDecode(tmp, command);
  ExpectCleanDecode(rec);
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind = CallgrindCalls(command, tmp.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  // From the source: the table alternates twice/thrice 100 times; fib recurses (gcc -O2
  // turns one of its two recursive calls into a loop, so the count is callgrind's).
  EXPECT_EQ(Calls(rec.decoded.calls, "twice"), 50u);
  EXPECT_EQ(Calls(rec.decoded.calls, "thrice"), 50u);
  EXPECT_EQ(Calls(rec.decoded.calls, "tail_caller"), 100u);
  EXPECT_GT(Calls(rec.decoded.calls, "fib"), 100u);
  for (const char* fn : {"main", "fib", "twice", "thrice", "tail_caller"}) {
    EXPECT_EQ(Calls(rec.decoded.calls, fn), Calls(*callgrind, fn)) << fn;
  }
}

TEST(ValgrindRecorderTest, InstructionCountIsWithinOnePercentOfLackeys) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  const std::vector<std::string> command = {Program("ptd_prog_cxx_exceptions")};
  Recorded rec = RecordAndDecode(tmp, command);
  ExpectCleanDecode(rec);
  absl::StatusOr<uint64_t> lackey = LackeyInstructions(command);
  ASSERT_TRUE(lackey.ok()) << lackey.status();
  const double ratio = static_cast<double>(rec.decoded.instructions) / static_cast<double>(*lackey);
  EXPECT_NEAR(ratio, 1.0, 0.01) << rec.decoded.instructions << " vs lackey " << *lackey;
}

TEST(ValgrindRecorderTest, ExceptionsUnwindAcrossFramesInEveryThread) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_cxx_thread_exceptions")});
  ExpectCleanDecode(rec);
  EXPECT_EQ(rec.summary.exit_status, 0);
  // Main and four workers, each its own track.
  EXPECT_EQ(rec.decoded.threads.size(), 5u);
  // From the source: 4 threads x 10 throws. Functions that are unwound through (not the
  // catching worker, whose frame the model resumes) begin a slice per call, as callgrind
  // counts them.
  EXPECT_EQ(Calls(rec.decoded.calls, "__cxa_throw"), 40u);
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind =
      CallgrindCalls({Program("ptd_prog_cxx_thread_exceptions")}, tmp.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  for (const char* fn : {"dive(int)", "__cxa_throw", "_Unwind_RaiseException"}) {
    EXPECT_EQ(Calls(rec.decoded.calls, fn), Calls(*callgrind, fn)) << fn;
  }
}

TEST(ValgrindRecorderTest, SignalHandlersRunBetweenTheInterruptedCode) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_signal")});
  ExpectCleanDecode(rec);
  EXPECT_EQ(rec.summary.signals_delivered, 3u);
  EXPECT_EQ(Calls(rec.decoded.calls, "in_handler"), 3u);
}

TEST(ValgrindRecorderTest, DlopenedAndClosedLibrariesDecodeAtTheirTimes) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_dlopen_swap")});
  ExpectCleanDecode(rec);
  EXPECT_EQ(rec.summary.exit_status, 0);
}

TEST(ValgrindRecorderTest, ClockLoopDecodes) {
  PTD_REQUIRE_VALGRIND();
  // Valgrind gives the program no vDSO on amd64: clock_gettime is a system call there.
  TempDir tmp;
  Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_vdso")});
  ExpectCleanDecode(rec);
  uint64_t clock_calls = 0;
  for (const auto& [name, n] : rec.decoded.calls) {
    if (name.find("clock_gettime") != std::string::npos) clock_calls += n;
  }
  EXPECT_EQ(clock_calls, 100u);  // the loop in the source
}

TEST(ValgrindRecorderTest, OcamlExceptionsDecode) {
  PTD_REQUIRE_VALGRIND();
  const std::string program = Program("ptd_prog_ocaml");
  if (!PathExists(program)) GTEST_SKIP() << "ocamlopt not installed: " << program << " not built";
  TempDir tmp;
  Recorded rec = RecordAndDecode(tmp, {program});
  ExpectCleanDecode(rec);
}

TEST(ValgrindRecorderTest, ForkedAndExecedChildrenAreRecordedAsThemselves) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_fork_exec")});
  ExpectCleanDecode(rec);
  ASSERT_EQ(rec.decoded.threads.size(), 2u);
  std::vector<std::string> names;
  for (const auto& [tid, name] : rec.decoded.threads) names.push_back(name);
  // The parent, and the child named after the program it exec'd (it ran both images).
  EXPECT_NE(std::find(names.begin(), names.end(), "ptd_prog_fork_e"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "ptd_prog_calls"), names.end());
  // The child ran ptd_prog_calls' functions; the parent its own.
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind = CallgrindCalls({Program("ptd_prog_fork_exec")}, tmp.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  for (const char* fn : {"fib", "twice", "parent_run", "parent_step"}) {
    EXPECT_GT(Calls(rec.decoded.calls, fn), 0u) << fn;
    EXPECT_EQ(Calls(rec.decoded.calls, fn), Calls(*callgrind, fn)) << fn;
  }
}

TEST(ValgrindRecorderTest, NoFollowRecordsOnlyTheParent) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_fork_exec")},
                                 [](RecordOptions& o) { o.follow_children = false; });
  EXPECT_EQ(rec.decoded.errors, 0u);
  EXPECT_EQ(rec.decoded.threads.size(), 1u);
  EXPECT_EQ(Calls(rec.decoded.calls, "fib"), 0u);
}

TEST(ValgrindRecorderTest, GccCompilingAFileIsRecordedWithItsChildren) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  ASSERT_TRUE(WriteFileAtomic(tmp.Sub("hello.c"), std::string_view("int square(int x) { return x * x; }\n")).ok());
  Recorded rec = RecordAndDecode(tmp, {"gcc", "-c", "-O2", "-o", tmp.Sub("hello.o"), tmp.Sub("hello.c")});
  ExpectCleanDecode(rec);
  EXPECT_EQ(rec.summary.exit_status, 0);
  std::vector<std::string> names;
  for (const auto& [tid, name] : rec.decoded.threads) names.push_back(name);
  // gcc runs the compiler proper and the assembler as children.
  for (const char* child : {"gcc", "cc1", "as"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), child), names.end()) << child;
  }
}

TEST(ValgrindRecorderTest, Python3RunningAScriptDecodesCompletely) {
  PTD_REQUIRE_VALGRIND();
  if (!PathExists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 not installed";
  TempDir tmp;
  const std::vector<std::string> command = {"/usr/bin/python3", "-c",
                                            "import json\nprint(len(json.dumps(list(range(300)))))"};
  Recorded rec = RecordAndDecode(tmp, command);
  ExpectCleanDecode(rec);
  EXPECT_GT(rec.summary.instructions, 10'000'000u);
  absl::StatusOr<uint64_t> lackey = LackeyInstructions(command);
  ASSERT_TRUE(lackey.ok()) << lackey.status();
  EXPECT_NEAR(static_cast<double>(rec.decoded.instructions) / static_cast<double>(*lackey), 1.0, 0.01);
}

TEST(ValgrindRecorderTest, TriggerStopsAtTheFirstCallOfTheSymbol) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_calls")},
                                 [](RecordOptions& o) { o.trigger_symbol = "fib"; });
  EXPECT_EQ(rec.summary.end_reason, "trigger");
  EXPECT_EQ(rec.summary.trigger_hits, 1u);
  EXPECT_EQ(rec.decoded.errors, 0u);
  // Everything before fib ran, and the call into it: the trace ends at its first
  // instruction (FUP + TIP.PGD there, as a hardware snapshot's interrupt shows).
  EXPECT_EQ(Calls(rec.decoded.calls, "twice"), 50u);
  EXPECT_EQ(Calls(rec.decoded.calls, "fib"), 1u);
}

TEST(ValgrindRecorderTest, MultiSnapshotTakesAChunkPerTriggerHit) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_calls")}, [](RecordOptions& o) {
    o.trigger_symbol = "twice";
    o.multi_snapshot = true;
    o.snapshot = true;
    o.snapshot_size = 64 << 10;
  });
  EXPECT_EQ(rec.summary.end_reason, "exit");
  EXPECT_EQ(rec.summary.trigger_hits, 50u);
  ASSERT_EQ(rec.meta.streams.size(), 1u);
  size_t trigger_chunks = 0;
  for (const PtChunk& chunk : rec.meta.streams[0].chunks) trigger_chunks += chunk.reason == "trigger";
  EXPECT_GE(trigger_chunks, 1u);
  EXPECT_EQ(rec.decoded.errors, 0u);
}

// ptd_prog_slow_call: handle_request's 7th call (the worker thread's) loops about 6 M
// instructions, 6 ms of the virtual clock; the others take under a microsecond.
constexpr char kSlowFunction[] = "handle_request";

TEST(ValgrindRecorderTest, SlowerThanTriggerStopsAfterTheSlowCallInTheWorkerThread) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  Recorded rec = RecordAndDecode(
      tmp, {Program("ptd_prog_slow_call"), "loop"},
      [](RecordOptions& o) {
        o.trigger_symbol = kSlowFunction;
        o.trigger_slower_than = "1ms";
      },
      kSlowFunction);
  EXPECT_EQ(rec.summary.end_reason, "trigger");
  EXPECT_EQ(rec.decoded.errors, 0u);
  ASSERT_TRUE(rec.meta.trigger.has_value());
  const TriggerPoint& point = *rec.meta.trigger;
  EXPECT_EQ(point.symbol, kSlowFunction);
  EXPECT_EQ(point.slower_than_ns, 1'000'000u);
  EXPECT_EQ(point.hit, 1u);
  ASSERT_EQ(rec.meta.pids.size(), 1u);
  EXPECT_NE(point.tid, rec.meta.pids[0]);  // the worker, not the main thread
  EXPECT_GT(point.return_ns - point.entry_ns, 1'000'000u);
  // The trace holds the worker's first seven calls, the last one whole (entry and
  // return), and nothing of main's calls after the join.
  EXPECT_EQ(Calls(rec.decoded.calls, kSlowFunction), 7u);
  ASSERT_EQ(rec.decoded.watched.size(), 7u);
  const WatchedSlice& slow = rec.decoded.watched.back();
  EXPECT_EQ(slow.tid, point.tid);
  EXPECT_TRUE(slow.returned);
  EXPECT_GT(slow.end - slow.begin, 1'000'000u);
  for (size_t i = 0; i + 1 < rec.decoded.watched.size(); ++i) {
    EXPECT_LT(rec.decoded.watched[i].end - rec.decoded.watched[i].begin, 1'000'000u) << "call " << i + 1;
  }
}

TEST(ValgrindRecorderTest, TriggerAfterFiresOnTheNthEntryInWhicheverThreadMakesIt) {
  PTD_REQUIRE_VALGRIND();
  for (uint64_t after : {5u, 12u}) {
    TempDir tmp;
    Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_slow_call"), "loop"}, [after](RecordOptions& o) {
      o.trigger_symbol = kSlowFunction;
      o.trigger_after = after;
    });
    EXPECT_EQ(rec.summary.end_reason, "trigger");
    ASSERT_TRUE(rec.meta.trigger.has_value());
    EXPECT_EQ(rec.meta.trigger->hit, after);
    EXPECT_EQ(rec.meta.trigger->return_ns, 0u);
    ASSERT_EQ(rec.meta.pids.size(), 1u);
    // The worker makes calls 1..10, main 11..14 after joining it.
    if (after <= 10) {
      EXPECT_NE(rec.meta.trigger->tid, rec.meta.pids[0]);
    } else {
      EXPECT_EQ(rec.meta.trigger->tid, rec.meta.pids[0]);
    }
    EXPECT_EQ(Calls(rec.decoded.calls, kSlowFunction), after);
    EXPECT_EQ(rec.decoded.errors, 0u);
  }
}

TEST(ValgrindRecorderTest, TrimKeepsTheSlowCallAndDropsTheStart) {
  PTD_REQUIRE_VALGRIND();
  TempDir full_tmp, trimmed_tmp;
  auto slower = [](bool trim) {
    return [trim](RecordOptions& o) {
      o.trigger_symbol = kSlowFunction;
      o.trigger_slower_than = "1ms";
      o.trim = trim;
    };
  };
  Recorded full = RecordAndDecode(full_tmp, {Program("ptd_prog_slow_call"), "loop"}, slower(false), kSlowFunction);
  Recorded trimmed =
      RecordAndDecode(trimmed_tmp, {Program("ptd_prog_slow_call"), "loop"}, slower(true), kSlowFunction);
  ASSERT_TRUE(trimmed.meta.trigger.has_value());
  EXPECT_EQ(trimmed.meta.trigger->trimmed_from_ns, trimmed.meta.trigger->entry_ns);
  EXPECT_EQ(full.meta.trigger->trimmed_from_ns, 0u);
  EXPECT_EQ(trimmed.decoded.errors, 0u);
  // The dynamic loader's hundred thousand instructions are gone; the slow call is whole.
  EXPECT_LT(trimmed.decoded.instructions, full.decoded.instructions - 50'000);
  ASSERT_FALSE(trimmed.decoded.watched.empty());
  const WatchedSlice& slow = trimmed.decoded.watched.back();
  EXPECT_TRUE(slow.returned);
  EXPECT_GT(slow.end - slow.begin, 1'000'000u);
  bool lost_before = false;
  for (const PtStream& stream : trimmed.meta.streams) {
    if (!stream.chunks.empty()) lost_before = lost_before || stream.chunks[0].lost_before;
  }
  EXPECT_TRUE(lost_before);
}

TEST(ValgrindRecorderTest, TriggerSymbolNotInTheProgramIsAnErrorBeforeRecording) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  RecordOptions options;
  options.command = {Program("ptd_prog_slow_call"), "loop"};
  options.output_dir = tmp.Sub("trace.dir");
  options.emulate = true;
  options.emulator = "valgrind";
  options.quiet = true;
  options.trigger_symbol = "handle_requets";
  options.trigger_slower_than = "5ms";
  absl::StatusOr<EmulatedRecordSummary> summary = RecordValgrind(options);
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("handle_requets"), std::string::npos) << summary.status();
  EXPECT_FALSE(PathExists(options.output_dir));
}

TEST(ValgrindRecorderTest, KilledProgramKeepsWhatWasRecorded) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  // Runs a while, then SIGKILLs itself.
  Recorded rec = RecordAndDecode(tmp, {"/bin/sh", "-c", "i=0; while [ $i -lt 200 ]; do i=$((i+1)); done; kill -9 $$"});
  EXPECT_EQ(rec.meta.end_reason, "target_killed");
  EXPECT_EQ(rec.summary.exit_status, 128 + SIGKILL);
  EXPECT_EQ(rec.decoded.errors, 0u);
  EXPECT_GT(rec.decoded.instructions, 100000u);
}

TEST(ValgrindRecorderTest, DurationStopsRecordingAndTheProgramRunsOn) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  // A program that mostly sleeps: the stream to drain at the stop stays small, so the
  // test takes the duration, not the converter's backlog (slow under sanitizers).
  Recorded rec = RecordAndDecode(tmp, {"/bin/sleep", "60"}, [](RecordOptions& o) { o.duration_s = 3.0; });
  EXPECT_EQ(rec.summary.end_reason, "duration");
  EXPECT_EQ(rec.decoded.errors, 0u);
  EXPECT_GT(rec.decoded.instructions, 50000u);  // sleep's start-up, up to its nanosleep
  ASSERT_EQ(rec.meta.pids.size(), 1u);
  // Still running (untraced); the test ends it.
  EXPECT_EQ(kill(rec.meta.pids[0], 0), 0);
  kill(rec.meta.pids[0], SIGKILL);
  waitpid(rec.meta.pids[0], nullptr, 0);
}

TEST(ValgrindRecorderTest, StaticProgramDecodes) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_calls_static")});
  EXPECT_EQ(rec.decoded.errors, 0u) << (rec.decoded.error_details.empty() ? "" : rec.decoded.error_details[0]);
  EXPECT_EQ(rec.decoded.instructions, rec.summary.instructions);
  EXPECT_EQ(Calls(rec.decoded.calls, "twice"), 50u);
  EXPECT_EQ(Calls(rec.decoded.calls, "tail_caller"), 100u);
}

TEST(ValgrindRecorderTest, TrappingInstructionKillsTheProgramAndTheTraceDecodes) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  // ud2: Valgrind delivers SIGILL, as the CPU would, and the program dies of it.
  Recorded rec = RecordAndDecode(tmp, {Program("ptd_prog_trap")});
  EXPECT_EQ(rec.summary.exit_status, 128 + SIGILL);
  EXPECT_EQ(rec.meta.end_reason, "target_killed");
  EXPECT_EQ(rec.decoded.errors, 0u) << (rec.decoded.error_details.empty() ? "" : rec.decoded.error_details[0]);
  EXPECT_EQ(rec.decoded.instructions, rec.summary.instructions);
  EXPECT_EQ(Calls(rec.decoded.calls, "before_trap"), 10u);
}

TEST(ValgrindRecorderTest, SigtermToTheRecorderCommitsTheTrace) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  std::thread terminator([] {
    sleep(3);
    kill(getpid(), SIGTERM);  // the recorder's handler takes it: a stop, not a death
  });
  Recorded rec = RecordAndDecode(tmp, {"/bin/sleep", "60"});
  terminator.join();
  EXPECT_EQ(rec.summary.end_reason, "sigterm");
  EXPECT_EQ(rec.decoded.errors, 0u);
  EXPECT_GT(rec.decoded.instructions, 50000u);
  ASSERT_EQ(rec.meta.pids.size(), 1u);
  kill(rec.meta.pids[0], SIGKILL);
  waitpid(rec.meta.pids[0], nullptr, 0);
}

TEST(ValgrindRecorderTest, FileSizeLimitKeepsWhatWasWrittenMarkedPartial) {
  PTD_REQUIRE_VALGRIND();
  TempDir tmp;
  const std::string dir = tmp.Sub("trace.dir");
  // 4 MB per file: the tool's stream of this run is far larger, so its writes fail.
  RunCommand({"/bin/sh", "-c",
              absl::StrCat("ulimit -f 4000; exec ", PTD_CLI_PATH, " record -q --emulate=valgrind -o ", dir,
                           " -- /usr/bin/python3 -c 'print(sum(range(300000)))'")});
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(dir);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_TRUE(meta->partial);
  EXPECT_NE(meta->partial_reason.find("could not write"), std::string::npos) << meta->partial_reason;
  absl::StatusOr<DecodedTrace> decoded = DecodeForTest(dir);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->errors, 0u);
  EXPECT_GT(decoded->instructions, 1000000u);
}

TEST(ValgrindRecorderTest, SetuidProgramIsRefusedWithTheAlternative) {
  PTD_REQUIRE_VALGRIND();
  std::string setuid;
  for (const char* candidate : {"/usr/bin/passwd", "/usr/bin/su", "/bin/su"}) {
    struct stat st;
    if (stat(candidate, &st) == 0 && (st.st_mode & S_ISUID) != 0) {
      setuid = candidate;
      break;
    }
  }
  if (setuid.empty()) GTEST_SKIP() << "no set-user-ID program (passwd, su) on this machine";
  TempDir tmp;
  RecordOptions options;
  options.command = {setuid, "--help"};
  options.output_dir = tmp.Sub("trace.dir");
  options.quiet = true;
  absl::StatusOr<EmulatedRecordSummary> r = RecordValgrind(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("set-user-ID"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("--emulate=ptrace"), std::string::npos) << r.status();
  EXPECT_FALSE(PathExists(options.output_dir));
}

TEST(ValgrindRecorderTest, AttachingIsRefusedWithTheAlternative) {
  RecordOptions options;
  options.pids = {getpid()};
  options.output_dir = "unused";
  absl::StatusOr<EmulatedRecordSummary> r = RecordValgrind(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--emulate=ptrace"), std::string::npos) << r.status();
}

TEST(ValgrindRecorderTest, MissingValgrindNamesThePackageAndTheAlternative) {
  const char* old_path = getenv("PATH");
  const std::string saved = old_path != nullptr ? old_path : "";
  setenv("PATH", "/nonexistent", 1);
  std::string why;
  const bool available = ValgrindAvailable(&why);
  setenv("PATH", saved.c_str(), 1);
  EXPECT_FALSE(available);
  EXPECT_NE(why.find("apt-get install valgrind"), std::string::npos) << why;
  EXPECT_NE(why.find("--emulate=ptrace"), std::string::npos) << why;
}

}  // namespace
}  // namespace ptd
