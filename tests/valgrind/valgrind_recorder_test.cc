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

#include <algorithm>
#include <cstdint>
#include <thread>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "decoder/model/call_stack_model.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

using Recorded = DecodedRecording;

// `watch`: a function whose slices the decode lists (DecodedTrace::watched).
Recorded RecordAndDecode(const TempDir& tmp, const std::vector<std::string>& command,
                         const std::function<void(RecordOptions&)>& tweak = nullptr,
                         const std::string& watch = "") {
  RecordOptions options = EmulatedRecordOptions(command, tmp.path(), "valgrind");
  if (tweak) tweak(options);
  return RecordAndDecodeForTest(RecordValgrind, options, watch);
}

// Decoding the trace finds exactly what the recorder put in, with no error.
void ExpectCleanDecode(const Recorded& rec) {
  EXPECT_EQ(rec.decoded.errors, 0u) << (rec.decoded.error_details.empty() ? "" : rec.decoded.error_details[0]);
  EXPECT_EQ(rec.decoded.instructions, rec.summary.instructions);
  EXPECT_GT(rec.summary.instructions, 100000u);  // the dynamic loader alone runs this much
  EXPECT_EQ(rec.meta.mode, TraceMode::kEmulated);
  EXPECT_EQ(rec.meta.emulator, "valgrind");
}

// Skips where Valgrind cannot run; a test's recordings go to tmp_.
class ValgrindRecorderTest : public ValgrindRecordingTest<> {
 protected:
  // `command` recorded and decoded, with the checks every clean recording passes.
  Recorded RecordCleanly(const std::vector<std::string>& command) {
    Recorded rec = RecordAndDecode(tmp_, command);
    ExpectCleanDecode(rec);
    return rec;
  }
};

// The recorder catches SIGINT, SIGTERM and SIGUSR2 and its control thread blocks every
// signal; the program under Valgrind must start with the recorder's own mask and
// dispositions (Valgrind passes the client's mask to the kernel around each syscall).
TEST_F(ValgrindRecorderTest, LaunchedProgramStartsWithTheRecordersOwnSignalState) {
  const SignalMasks parent = SignalMasksOf(*ReadFileToString("/proc/self/status"));
  const std::string report = tmp_.Sub("signals.txt");
  Recorded rec = RecordAndDecode(tmp_, {Program("ptd_prog_signal_state"), report});
  ASSERT_FALSE(rec.dir.empty());
  ExpectSignalStateOf(parent, report);
}

TEST_F(ValgrindRecorderTest, CallsPerFunctionEqualCallgrindsAndTheSource) {
  const std::vector<std::string> command = {Program("ptd_prog_calls")};
  Recorded rec = RecordCleanly(command);
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind = CallgrindCalls(command, tmp_.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  // From the source: the table alternates twice/thrice 100 times; fib recurses (gcc -O2
  // turns one of its two recursive calls into a loop, so the count is callgrind's).
  EXPECT_EQ(CallsOf(rec.decoded.calls, "twice"), 50u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "thrice"), 50u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "tail_caller"), 100u);
  EXPECT_GT(CallsOf(rec.decoded.calls, "fib"), 100u);
  for (const char* fn : {"main", "fib", "twice", "thrice", "tail_caller"}) {
    EXPECT_EQ(CallsOf(rec.decoded.calls, fn), CallsOf(*callgrind, fn)) << fn;
  }
}

// The converter charges every system call 1000 ns of virtual time (kSyscallNs) after the
// syscall instruction's own nanosecond; on the default time axis each [syscall] slice
// (kernel entry to the next user instruction) is exactly that long.
// Each [syscall] slice on the default time axis lasts what the converter charged: the
// time the tool measured around the call (at least 1 us), which the CYC packets count
// exactly (the cycles axis: the emulator's clock tick for tick).
TEST_F(ValgrindRecorderTest, SyscallSlicesLastTheTimeTheConverterCharged) {
  Recorded rec = RecordAndDecode(tmp_, {Program("ptd_prog_calls")}, nullptr, "[syscall]");
  ExpectCleanDecode(rec);
  absl::StatusOr<DecodedTrace> cycles = DecodeForTest(rec.dir, "[syscall]", /*cycles_axis=*/true);
  ASSERT_TRUE(cycles.ok()) << cycles.status();
  ASSERT_GT(rec.decoded.watched.size(), 20u);  // the dynamic loader's mmaps, opens, reads
  ASSERT_EQ(rec.decoded.watched.size(), cycles->watched.size());
  size_t exact = 0;
  size_t returned = 0;
  std::string differ;
  for (size_t i = 0; i < rec.decoded.watched.size(); ++i) {
    const WatchedSlice& t = rec.decoded.watched[i];
    const WatchedSlice& c = cycles->watched[i];
    if (!t.returned) continue;
    ++returned;
    EXPECT_GE(t.end - t.begin, 1000u) << "slice " << i;
    // Before the decoder's clock followed the packets: 8 to 999 ns (time extrapolated from
    // the interval before, clamped), whatever the call took.
    if (t.end - t.begin == c.end - c.begin) {
      ++exact;
    } else {
      absl::StrAppend(&differ, " #", i, ": ", t.end - t.begin, " vs ", c.end - c.begin);
    }
  }
  // A rare slice differs by a nanosecond or so (libipt times a TNT packet at its first branch).
  EXPECT_GE(exact * 20, returned * 19) << differ;
}

TEST_F(ValgrindRecorderTest, InstructionCountIsWithinOnePercentOfLackeys) {
  const std::vector<std::string> command = {Program("ptd_prog_cxx_exceptions")};
  Recorded rec = RecordCleanly(command);
  absl::StatusOr<uint64_t> lackey = LackeyInstructions(command);
  ASSERT_TRUE(lackey.ok()) << lackey.status();
  const double ratio = static_cast<double>(rec.decoded.instructions) / static_cast<double>(*lackey);
  EXPECT_NEAR(ratio, 1.0, 0.01) << rec.decoded.instructions << " vs lackey " << *lackey;
}

TEST_F(ValgrindRecorderTest, ExceptionsUnwindAcrossFramesInEveryThread) {
  Recorded rec = RecordCleanly({Program("ptd_prog_cxx_thread_exceptions")});
  EXPECT_EQ(rec.summary.exit_status, 0);
  // Main and four workers, each its own track.
  EXPECT_EQ(rec.decoded.threads.size(), 5u);
  // From the source: 4 threads x 10 throws. Functions that are unwound through (not the
  // catching worker, whose frame the model resumes) begin a slice per call, as callgrind
  // counts them.
  EXPECT_EQ(CallsOf(rec.decoded.calls, "__cxa_throw"), 40u);
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind =
      CallgrindCalls({Program("ptd_prog_cxx_thread_exceptions")}, tmp_.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  for (const char* fn : {"dive(int)", "__cxa_throw", "_Unwind_RaiseException"}) {
    EXPECT_EQ(CallsOf(rec.decoded.calls, fn), CallsOf(*callgrind, fn)) << fn;
  }
}

TEST_F(ValgrindRecorderTest, SignalHandlersRunBetweenTheInterruptedCode) {
  Recorded rec = RecordCleanly({Program("ptd_prog_signal")});
  EXPECT_EQ(rec.summary.signals_delivered, 3u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "in_handler"), 3u);
}

TEST_F(ValgrindRecorderTest, DlopenedAndClosedLibrariesDecodeAtTheirTimes) {
  Recorded rec = RecordCleanly({Program("ptd_prog_dlopen_swap")});
  EXPECT_EQ(rec.summary.exit_status, 0);
}

TEST_F(ValgrindRecorderTest, ClockLoopDecodes) {
  // Valgrind gives the program no vDSO on amd64: clock_gettime is a system call there.
  Recorded rec = RecordCleanly({Program("ptd_prog_vdso")});
  uint64_t clock_calls = 0;
  for (const auto& [name, n] : rec.decoded.calls) {
    if (name.find("clock_gettime") != std::string::npos) clock_calls += n;
  }
  EXPECT_EQ(clock_calls, 100u);  // the loop in the source
}

TEST_F(ValgrindRecorderTest, OcamlExceptionsDecode) {
  const std::string program = Program("ptd_prog_ocaml");
  if (!PathExists(program)) GTEST_SKIP() << "ocamlopt not installed: " << program << " not built";
  Recorded rec = RecordCleanly({program});
}

// The names of the slices `name`'s slices began in ("" = at the top of its thread).
std::set<std::string> ParentsOf(const Recorded& rec, const std::string& name) {
  std::set<std::string> parents;
  auto it = rec.decoded.parents.find(name);
  if (it == rec.decoded.parents.end()) return parents;
  for (const auto& [parent, n] : it->second) parents.insert(parent);
  return parents;
}

// A Go program (Debian's golang-go): 8 worker goroutines fed over channels, a panic
// recovered twice, a goroutine recursing deep enough to grow its stack. Each goroutine's
// frames stay apart across the runtime's switches (mcall, morestack, gogo): every slice
// of a worker is at the top of its thread, every call of work is inside a worker.
TEST_F(ValgrindRecorderTest, GoGoroutinesKeepTheirOwnStacks) {
  const std::string program = Program("ptd_prog_go_goroutines");
  if (!PathExists(program)) GTEST_SKIP() << "go not found: " << program << " not built";
  for (const char* procs : {"1", "4"}) {
    SCOPED_TRACE(absl::StrCat("GOMAXPROCS=", procs));
    TempDir tmp;
    Recorded rec = RecordAndDecode(tmp, {"/usr/bin/env", absl::StrCat("GOMAXPROCS=", procs), program});
    ExpectCleanDecode(rec);
    EXPECT_EQ(rec.summary.exit_status, 0);
    EXPECT_EQ(rec.decoded.unbalanced, 0u);
    EXPECT_EQ(CallsOf(rec.decoded.calls, "main.work"), 200u);  // workers * jobsPerWork
    EXPECT_EQ(ParentsOf(rec, "main.work"), std::set<std::string>{"main.worker"});
    EXPECT_EQ(ParentsOf(rec, "main.worker"), std::set<std::string>{""});
    EXPECT_EQ(ParentsOf(rec, "main.producer"), std::set<std::string>{""});
    EXPECT_EQ(ParentsOf(rec, "main.deepRoot"), std::set<std::string>{""});
    EXPECT_EQ(ParentsOf(rec, "runtime.main"), std::set<std::string>{""});
    EXPECT_EQ(ParentsOf(rec, "main.main"), std::set<std::string>{"runtime.main"});
    EXPECT_EQ(ParentsOf(rec, "main.mayPanic"), std::set<std::string>{"main.main"});
    // A recovered panic continues the deferring frame: one slice per call, two panics.
    EXPECT_EQ(CallsOf(rec.decoded.calls, "main.mayPanic"), 4u);
    EXPECT_EQ(CallsOf(rec.decoded.calls, "runtime.gopanic"), 2u);
    // Inside deepRoot; or at the top: a goroutine that ran on another thread comes back
    // with callers the model infers as it returns (a stale copy of a shallower stack,
    // parked at the same PC of deep, can be taken for it: recursion returns to the same
    // address at every level, so nothing tells them apart before the bottom).
    for (const std::string& parent : ParentsOf(rec, "main.deep")) {
      EXPECT_TRUE(parent == "main.deep" || parent == "main.deepRoot" || parent.empty()) << parent;
    }
    EXPECT_TRUE(ParentsOf(rec, "main.deep").count("main.deepRoot"));
    EXPECT_GT(CallsOf(rec.decoded.calls, "runtime.morestack.abi0"), 0u);  // deep grew its stack
    EXPECT_GT(CallsOf(rec.decoded.calls, "runtime.mcall"), 100u);         // goroutines parked
    // deep(2000) nests 2001 frames: folded at the model's limit, never past it.
    EXPECT_LE(rec.decoded.max_depth, decoder::CallStackModel::kFoldDepth + 1);
  }
}

// Asynchronous preemption (GOMAXPROCS=1, a goroutine spinning without calls): the signal
// handler makes the spinner call asyncPreempt, whose mcall parks it; it is resumed later
// inside asyncPreempt and returns into its loop. Its frames stay its own.
TEST_F(ValgrindRecorderTest, GoAsyncPreemptionParksAndResumesTheSpinningGoroutine) {
  const std::string program = Program("ptd_prog_go_preempt");
  if (!PathExists(program)) GTEST_SKIP() << "go not found: " << program << " not built";
  Recorded rec = RecordAndDecode(tmp_, {"/usr/bin/env", "GOMAXPROCS=1", program});
  ExpectCleanDecode(rec);
  EXPECT_EQ(rec.summary.exit_status, 0);
  EXPECT_EQ(rec.decoded.unbalanced, 0u);
  EXPECT_GT(CallsOf(rec.decoded.calls, "runtime.asyncPreempt.abi0"), 0u);  // it was preempted
  EXPECT_EQ(ParentsOf(rec, "main.spin"), std::set<std::string>{""});
  EXPECT_EQ(ParentsOf(rec, "main.main"), std::set<std::string>{"runtime.main"});
  // Entered by the signal's return (a frame of the spinner's stack), then resumed.
  const std::set<std::string> entered_from = {"main.spin", "runtime.sigreturn.abi0"};
  for (const std::string& parent : ParentsOf(rec, "runtime.asyncPreempt.abi0")) {
    EXPECT_TRUE(entered_from.count(parent)) << parent;
  }
}

TEST_F(ValgrindRecorderTest, ForkedAndExecedChildrenAreRecordedAsThemselves) {
  Recorded rec = RecordCleanly({Program("ptd_prog_fork_exec")});
  ASSERT_EQ(rec.decoded.threads.size(), 2u);
  std::vector<std::string> names;
  for (const auto& [tid, name] : rec.decoded.threads) names.push_back(name);
  // The parent, and the child named after the program it exec'd (it ran both images).
  EXPECT_NE(std::find(names.begin(), names.end(), "ptd_prog_fork_e"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "ptd_prog_calls"), names.end());
  // The child ran ptd_prog_calls' functions; the parent its own.
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind = CallgrindCalls({Program("ptd_prog_fork_exec")}, tmp_.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  for (const char* fn : {"fib", "twice", "parent_run", "parent_step"}) {
    EXPECT_GT(CallsOf(rec.decoded.calls, fn), 0u) << fn;
    EXPECT_EQ(CallsOf(rec.decoded.calls, fn), CallsOf(*callgrind, fn)) << fn;
  }
}

// A shell pipeline of programs that fork after they exec: sh forks /bin/true, then
// execs env, which execs bash (as `#!/usr/bin/env bash` scripts do), whose first fork (a
// command substitution) is again its program's fork number 1; bash runs a #!/bin/sh
// script (Valgrind loads its interpreter), which forks in turn. Every child inherits the mappings of the program that forked it, at that
// fork's time: each process decodes with no error and its own calls.
TEST_F(ValgrindRecorderTest, ShellChildrenForkedAfterExecsDecodeCleanly) {
  for (const char* program : {"/bin/sh", "/bin/bash", "/usr/bin/env"}) {
    if (!PathExists(program)) GTEST_SKIP() << program << " not installed";
  }
  const std::string script = tmp_.Sub("child.sh");
  ASSERT_TRUE(WriteFileAtomic(script, std::string_view("#!/bin/sh\n/bin/true\n/bin/echo done >/dev/null\n")).ok());
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  Recorded rec = RecordCleanly(
      {"/bin/sh", "-c", absl::StrCat("/bin/true; exec /usr/bin/env /bin/bash -c 'x=$(/bin/echo hi); ", script, "; /bin/true'")});
  EXPECT_EQ(rec.summary.exit_status, 0);
  // sh -> env -> bash -> true; sh's true; bash's $(/bin/echo); the script, and its true and echo.
  std::map<std::string, int> processes;
  uint64_t most_programs = 0;
  int bash_forks = 0, substitutions = 0;
  for (const auto& [tid, name] : rec.decoded.threads) {
    ++processes[name];
    const std::string who = absl::StrCat("tid ", tid, " (", name, ")");
    EXPECT_EQ(rec.decoded.thread_errors[tid], 0u) << who;
    // Every process started a program of its own (each one exec'd).
    std::map<std::string, uint64_t>& calls = rec.decoded.thread_calls[tid];
    EXPECT_GE(calls["__libc_start_main"], 1u) << who;
    most_programs = std::max(most_programs, calls["__libc_start_main"]);
    // bash and its children ran bash's code from the fork (make_child) to the exec
    // (shell_execve) before they became something else.
    if (calls["make_child"] > 0) {
      ++bash_forks;
      EXPECT_EQ(calls["shell_execve"], 1u) << who;
    }
    if (name == "echo" && calls["command_substitute"] > 0) ++substitutions;
  }
  EXPECT_EQ(processes["true"], 3);
  EXPECT_EQ(processes["echo"], 2);
  EXPECT_EQ(processes["child.sh"], 1);
  EXPECT_EQ(rec.decoded.threads.size(), 6u);
  // The first process ran sh, env, bash and true: its later programs too (the tool's
  // files for them are named as the first ones were, once those were read).
  EXPECT_EQ(most_programs, 4u);
  EXPECT_EQ(bash_forks, 3);  // bash itself, its substitution and the script's process
  EXPECT_EQ(substitutions, 1);
}

TEST_F(ValgrindRecorderTest, NoFollowRecordsOnlyTheParent) {
  Recorded rec = RecordAndDecode(tmp_, {Program("ptd_prog_fork_exec")},
                                 [](RecordOptions& o) { o.follow_children = false; });
  EXPECT_EQ(rec.decoded.errors, 0u);
  EXPECT_EQ(rec.decoded.threads.size(), 1u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "fib"), 0u);
}

TEST_F(ValgrindRecorderTest, GccCompilingAFileIsRecordedWithItsChildren) {
  ASSERT_TRUE(WriteFileAtomic(tmp_.Sub("hello.c"), std::string_view("int square(int x) { return x * x; }\n")).ok());
  Recorded rec = RecordCleanly({"gcc", "-c", "-O2", "-o", tmp_.Sub("hello.o"), tmp_.Sub("hello.c")});
  EXPECT_EQ(rec.summary.exit_status, 0);
  std::vector<std::string> names;
  for (const auto& [tid, name] : rec.decoded.threads) names.push_back(name);
  // gcc runs the compiler proper and the assembler as children.
  for (const char* child : {"gcc", "cc1", "as"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), child), names.end()) << child;
  }
}

TEST_F(ValgrindRecorderTest, Python3RunningAScriptDecodesCompletely) {
  if (!PathExists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 not installed";
  const std::vector<std::string> command = {"/usr/bin/python3", "-c",
                                            "import json\nprint(len(json.dumps(list(range(300)))))"};
  Recorded rec = RecordCleanly(command);
  EXPECT_GT(rec.summary.instructions, 10'000'000u);
  absl::StatusOr<uint64_t> lackey = LackeyInstructions(command);
  ASSERT_TRUE(lackey.ok()) << lackey.status();
  EXPECT_NEAR(static_cast<double>(rec.decoded.instructions) / static_cast<double>(*lackey), 1.0, 0.01);
}

TEST_F(ValgrindRecorderTest, TriggerStopsAtTheFirstCallOfTheSymbol) {
  Recorded rec = RecordAndDecode(tmp_, {Program("ptd_prog_calls")},
                                 [](RecordOptions& o) { o.trigger_symbol = "fib"; });
  EXPECT_EQ(rec.summary.end_reason, "trigger");
  EXPECT_EQ(rec.summary.trigger_hits, 1u);
  EXPECT_EQ(rec.decoded.errors, 0u);
  // Everything before fib ran, and the call into it: the trace ends at its first
  // instruction (FUP + TIP.PGD there, as a hardware snapshot's interrupt shows).
  EXPECT_EQ(CallsOf(rec.decoded.calls, "twice"), 50u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "fib"), 1u);
}

TEST_F(ValgrindRecorderTest, MultiSnapshotTakesAChunkPerTriggerHit) {
  Recorded rec = RecordAndDecode(tmp_, {Program("ptd_prog_calls")}, [](RecordOptions& o) {
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

TEST_F(ValgrindRecorderTest, SlowerThanTriggerStopsAfterTheSlowCallInTheWorkerThread) {
  Recorded rec = RecordAndDecode(
      tmp_, {Program("ptd_prog_slow_call"), "loop"},
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
  EXPECT_EQ(CallsOf(rec.decoded.calls, kSlowFunction), 7u);
  ASSERT_EQ(rec.decoded.watched.size(), 7u);
  const WatchedSlice& slow = rec.decoded.watched.back();
  EXPECT_EQ(slow.tid, point.tid);
  // The slice is the call the recorder saw, entry to return (the trace ends right after
  // the return, so it also ends with the thread's trace).
  EXPECT_LE(std::max(slow.begin, point.entry_ns) - std::min(slow.begin, point.entry_ns), 16u);
  EXPECT_LE(std::max(slow.end, point.return_ns) - std::min(slow.end, point.return_ns), 16u);
  EXPECT_GT(slow.end - slow.begin, 1'000'000u);
  for (size_t i = 0; i + 1 < rec.decoded.watched.size(); ++i) {
    EXPECT_LT(rec.decoded.watched[i].end - rec.decoded.watched[i].begin, 1'000'000u) << "call " << i + 1;
  }
}

TEST_F(ValgrindRecorderTest, TriggerAfterFiresOnTheNthEntryInWhicheverThreadMakesIt) {
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
    EXPECT_EQ(CallsOf(rec.decoded.calls, kSlowFunction), after);
    EXPECT_EQ(rec.decoded.errors, 0u);
  }
}

TEST_F(ValgrindRecorderTest, TrimKeepsTheSlowCallAndDropsTheStart) {
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
  const TriggerPoint& point = *trimmed.meta.trigger;
  // The slice is the call the recorder saw, entry to return (the trace ends right after
  // the return, so it also ends with the thread's trace).
  EXPECT_LE(std::max(slow.begin, point.entry_ns) - std::min(slow.begin, point.entry_ns), 16u);
  EXPECT_LE(std::max(slow.end, point.return_ns) - std::min(slow.end, point.return_ns), 16u);
  EXPECT_GT(slow.end - slow.begin, 1'000'000u);
  bool lost_before = false;
  for (const PtStream& stream : trimmed.meta.streams) {
    if (!stream.chunks.empty()) lost_before = lost_before || stream.chunks[0].lost_before;
  }
  EXPECT_TRUE(lost_before);
}

TEST_F(ValgrindRecorderTest, TriggerSymbolNotInTheProgramIsAnErrorBeforeRecording) {
  RecordOptions options = EmulatedRecordOptions({Program("ptd_prog_slow_call"), "loop"}, tmp_.path(), "valgrind");
  options.trigger_symbol = "handle_requets";
  options.trigger_slower_than = "5ms";
  absl::StatusOr<EmulatedRecordSummary> summary = RecordValgrind(options);
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("handle_requets"), std::string::npos) << summary.status();
  EXPECT_FALSE(PathExists(options.output_dir));
}

TEST_F(ValgrindRecorderTest, KilledProgramKeepsWhatWasRecorded) {
  // Runs a while, then SIGKILLs itself.
  Recorded rec = RecordAndDecode(tmp_, {"/bin/sh", "-c", "i=0; while [ $i -lt 200 ]; do i=$((i+1)); done; kill -9 $$"});
  EXPECT_EQ(rec.meta.end_reason, "target_killed");
  EXPECT_EQ(rec.summary.exit_status, 128 + SIGKILL);
  EXPECT_EQ(rec.decoded.errors, 0u);
  EXPECT_GT(rec.decoded.instructions, 100000u);
}

TEST_F(ValgrindRecorderTest, DurationStopsRecordingAndEndsTheProgramWithSigterm) {
  // A program that mostly sleeps: the stream to drain at the stop stays small, so the
  // test takes the duration, not the converter's backlog (slow under sanitizers).
  Recorded rec = RecordAndDecode(tmp_, {"/bin/sleep", "60"}, [](RecordOptions& o) { o.duration_s = 3.0; });
  EXPECT_EQ(rec.summary.end_reason, "duration");
  EXPECT_EQ(rec.decoded.errors, 0u);
  EXPECT_GT(rec.decoded.instructions, 50000u);  // sleep's start-up, up to its nanosleep
  ASSERT_EQ(rec.meta.pids.size(), 1u);
  // It does not go on untraced: SIGTERM, as perf record ends its workload (docs/cli.md).
  EXPECT_NE(kill(rec.meta.pids[0], 0), 0);
  EXPECT_NE(std::find(rec.meta.notes.begin(), rec.meta.notes.end(), "target process killed by SIGTERM"),
            rec.meta.notes.end());
  EXPECT_EQ(rec.summary.exit_status, -1) << "the recording, not the program, ended the run";
}

TEST_F(ValgrindRecorderTest, StaticProgramDecodes) {
  Recorded rec = RecordAndDecode(tmp_, {Program("ptd_prog_calls_static")});
  EXPECT_EQ(rec.decoded.errors, 0u) << (rec.decoded.error_details.empty() ? "" : rec.decoded.error_details[0]);
  EXPECT_EQ(rec.decoded.instructions, rec.summary.instructions);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "twice"), 50u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "tail_caller"), 100u);
}

TEST_F(ValgrindRecorderTest, TrappingInstructionKillsTheProgramAndTheTraceDecodes) {
  // ud2: Valgrind delivers SIGILL, as the CPU would, and the program dies of it.
  Recorded rec = RecordAndDecode(tmp_, {Program("ptd_prog_trap")});
  EXPECT_EQ(rec.summary.exit_status, 128 + SIGILL);
  EXPECT_EQ(rec.meta.end_reason, "target_killed");
  EXPECT_EQ(rec.decoded.errors, 0u) << (rec.decoded.error_details.empty() ? "" : rec.decoded.error_details[0]);
  EXPECT_EQ(rec.decoded.instructions, rec.summary.instructions);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "before_trap"), 10u);
}

TEST_F(ValgrindRecorderTest, SigtermToTheRecorderCommitsTheTrace) {
  std::thread terminator([] {
    sleep(3);
    kill(getpid(), SIGTERM);  // the recorder's handler takes it: a stop, not a death
  });
  Recorded rec = RecordAndDecode(tmp_, {"/bin/sleep", "60"});
  terminator.join();
  EXPECT_EQ(rec.summary.end_reason, "sigterm");
  EXPECT_EQ(rec.decoded.errors, 0u);
  EXPECT_GT(rec.decoded.instructions, 50000u);
  ASSERT_EQ(rec.meta.pids.size(), 1u);
  kill(rec.meta.pids[0], SIGKILL);
  waitpid(rec.meta.pids[0], nullptr, 0);
}

TEST_F(ValgrindRecorderTest, FileSizeLimitKeepsWhatWasWrittenMarkedPartial) {
  const std::string dir = tmp_.Sub("trace.dir");
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

// Valgrind cannot run a setuid program with its privileges: it runs untraced, as
// without the tool, and the trace's notes say so and what can record it.
TEST_F(ValgrindRecorderTest, SetuidProgramRunsUntracedNamingTheAlternative) {
  std::string setuid;
  for (const char* candidate : {"/usr/bin/passwd", "/usr/bin/su", "/bin/su"}) {
    struct stat st;
    if (stat(candidate, &st) == 0 && (st.st_mode & S_ISUID) != 0) {
      setuid = candidate;
      break;
    }
  }
  if (setuid.empty()) GTEST_SKIP() << "no set-user-ID program (passwd, su) on this machine";
  RecordOptions options;
  options.command = {setuid, "--help"};
  options.output_dir = tmp_.Sub("trace.dir");
  options.quiet = true;
  absl::StatusOr<EmulatedRecordSummary> r = RecordValgrind(options);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(options.output_dir);
  ASSERT_TRUE(meta.ok()) << meta.status();
  const std::string notes = absl::StrJoin(meta->notes, "\n");
  EXPECT_TRUE(absl::StrContains(notes, absl::StrCat(setuid, ", which ran untraced (setuid"))) << notes;
  EXPECT_TRUE(absl::StrContains(notes, "--emulate=ptrace")) << notes;
}

TEST_F(ValgrindRecorderTest, AttachingIsRefusedWithTheAlternative) {
  RecordOptions options;
  options.pids = {getpid()};
  options.output_dir = "unused";
  absl::StatusOr<EmulatedRecordSummary> r = RecordValgrind(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--emulate=ptrace"), std::string::npos) << r.status();
}

TEST_F(ValgrindRecorderTest, MissingValgrindNamesThePackageAndTheAlternative) {
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
}  // namespace ptd::testing
