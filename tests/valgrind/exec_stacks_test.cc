// An exec ends the old program's stacks. Real programs that exec (a shell's `exec`, fork
// then exec, posix_spawn, an exec while another thread is blocked) are recorded with the
// Valgrind backend (and posix_spawn with the ptrace backend) and decoded. The sideband
// says when each exec happened (COMM records with the exec flag); the programs' sources
// say what the new program runs (ptd_prog_calls: fib(12) makes 465 calls of fib).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "decoder/output/slice_sink.h"
#include "decoder/trace_decoder.h"
#include "gtest/gtest.h"
#include "recorder/emulate/emulated_recorder.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "sideband/sideband_set.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

// Slices and instants, with their times and their place in the thread's sequence of
// events (times may be equal).
struct Slice {
  std::string name;
  uint64_t begin = 0;
  uint64_t end = 0;
  std::string parent;  // "" at depth 0
  size_t begin_seq = 0;
  size_t end_seq = 0;
};

struct InstantEvent {
  uint64_t time = 0;
  std::string name;
  std::string detail;
  size_t seq = 0;
};

// Every slice and instant of every thread.
class SliceLog : public decoder::ThreadSinkFactory {
 public:
  struct Thread : decoder::SliceSink {
    int pid = 0;
    std::vector<Slice> slices;  // in the order they ended
    std::vector<InstantEvent> instants;
    std::vector<Slice> open;
    size_t seq = 0;
    void Begin(uint64_t time, absl::string_view name) override {
      open.push_back(Slice{std::string(name), time, 0, open.empty() ? "" : open.back().name, seq++, 0});
    }
    void End(uint64_t time, const decoder::SliceCounts&) override {
      if (open.empty()) return;
      open.back().end = time;
      open.back().end_seq = seq++;
      slices.push_back(open.back());
      open.pop_back();
    }
    void Instant(uint64_t time, absl::string_view name, absl::string_view detail) override {
      instants.push_back({time, std::string(name), std::string(detail), seq++});
    }
  };
  decoder::SliceSink* ForThread(int pid, int tid, const std::string&, const std::string&) override {
    std::unique_ptr<Thread>& thread = threads[tid];
    thread = std::make_unique<Thread>();
    thread->pid = pid;
    return thread.get();
  }
  std::map<int, std::unique_ptr<Thread>> threads;  // by tid
};

// An exec that replaced a program the trace ran: a COMM with the exec flag after the
// thread had a name (its first program's exec, or the name a fork gave it).
struct Exec {
  int pid = 0;
  uint64_t time = 0;
  std::string program;
};

class ExecStacksTest : public ::testing::Test {
 protected:
  // Records `command` with `backend` ("valgrind" or "ptrace") and decodes it into log_
  // (--jobs 1), the sideband's execs into execs_.
  void Record(const std::vector<std::string>& command, const std::string& backend) {
    const RecordOptions options = EmulatedRecordOptions(command, tmp_.path(), backend);
    DecodedRecording rec = RecordForTest(backend == "valgrind" ? RecordValgrind : RecordEmulated, options);
    ASSERT_FALSE(rec.dir.empty());
    dir_ = rec.dir;
    absl::StatusOr<decoder::DecodeResult> decoded = Decode(1, &log_);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->stats[decoder::Stat::kErrors], 0u);
    absl::StatusOr<Sideband> sideband = LoadSideband(dir_, rec.meta);
    ASSERT_TRUE(sideband.ok()) << sideband.status();
    for (const ThreadInfo& thread : sideband->threads.Threads()) {
      for (size_t i = 1; i < thread.names.size(); ++i) {
        if (thread.names[i].exec) execs_.push_back({thread.pid, thread.names[i].time_ns, thread.names[i].name});
      }
    }
  }
  absl::StatusOr<decoder::DecodeResult> Decode(int jobs, SliceLog* log, bool cycles_axis = false) {
    decoder::DecodeOptions options;
    options.jobs = jobs;
    if (cycles_axis) options.axis = decoder::TimeAxisChoice::kCycles;
    options.piece_bytes = 4096;  // many pieces: some hold the exec
    return decoder::DecodeTrace(dir_, options, log);
  }
  const SliceLog::Thread& ThreadOf(int tid) {
    static const SliceLog::Thread kNone;
    auto it = log_.threads.find(tid);
    return it == log_.threads.end() ? kNone : *it->second;
  }
  uint64_t CallsIn(int tid, const std::string& name) {
    const SliceLog::Thread& thread = ThreadOf(tid);
    return std::count_if(thread.slices.begin(), thread.slices.end(), [&](const Slice& s) { return s.name == name; });
  }

  // What every exec must look like: the exec'ing thread's slices of the old program end
  // at the exec (none goes on into the new program), an instant names the new program,
  // and the new program's frames start at depth 0. `exact`: the trace's times are the
  // sideband's (the Valgrind backend's virtual clock), so the instant is at the exec's
  // time; else (interpolated wall-clock times) it may be at the events next to it.
  void ExpectExecEndsTheOldProgram(const Exec& exec, bool exact) {
    SCOPED_TRACE(absl::StrCat("pid ", exec.pid, " exec of ", exec.program, " at ", exec.time));
    const SliceLog::Thread& thread = ThreadOf(exec.pid);
    auto instant = std::find_if(thread.instants.begin(), thread.instants.end(),
                                [&](const InstantEvent& i) { return i.name == "exec" && i.detail == exec.program; });
    ASSERT_NE(instant, thread.instants.end()) << "no exec instant naming " << exec.program;
    if (exact) {
      EXPECT_EQ(instant->time, exec.time);
    }
    size_t old_slices = 0;
    for (const Slice& s : thread.slices) {
      if (s.begin_seq > instant->seq) continue;
      ++old_slices;
      EXPECT_LT(s.end_seq, instant->seq) << s.name << " outlives the exec";
      EXPECT_LE(s.end, instant->time) << s.name << " [" << s.begin << ", " << s.end << ") outlives the exec";
    }
    EXPECT_GT(old_slices, 0u);
    // The new program's first slice is its entry, at depth 0.
    const Slice* first = nullptr;
    for (const Slice& s : thread.slices) {
      if (s.begin_seq > instant->seq && (first == nullptr || s.begin_seq < first->begin_seq)) first = &s;
    }
    ASSERT_NE(first, nullptr);
    EXPECT_GE(first->begin, instant->time);
    EXPECT_EQ(first->parent, "") << first->name;
  }

  // Nothing but the syscall marker runs inside execve, in any thread, and every `_start`
  // (the loader's and the executable's entries) is at depth 0.
  void ExpectNothingNestsUnderExecve() {
    for (const auto& [tid, thread] : log_.threads) {
      for (const Slice& s : thread->slices) {
        if (s.parent == "execve" || s.parent == "__execve") {
          EXPECT_EQ(s.name, "[syscall]") << "tid " << tid << ": " << s.name << " under " << s.parent;
        }
        if (s.name == "_start") {
          EXPECT_EQ(s.parent, "") << "tid " << tid;
        }
      }
    }
  }

  // `program` (recorded by `backend`) starts a child that execs ptd_prog_calls: that exec
  // ends the child's inherited frames, and ptd_prog_calls runs from an empty stack.
  // `exact`: the trace's times are the sideband's (ExpectExecEndsTheOldProgram).
  void ExpectAChildExecsProgCalls(const std::string& program, const std::string& backend, bool exact) {
    Record({Program(program)}, backend);
    if (HasFatalFailure()) return;
    ASSERT_EQ(execs_.size(), 1u);
    ExpectExecEndsTheOldProgram(execs_[0], exact);
    ExpectNothingNestsUnderExecve();
    ExpectProgCallsRanIn(execs_[0].pid);
    ExpectSameInParallel();
  }

  // --jobs 2 in 4 KiB pieces writes the slices and instants --jobs 1 writes, on the cycles
  // axis (the default axis takes libipt's time estimate, whose CYC calibration starts
  // afresh in each piece: after a long system call it differs for a while; docs/decoder.md).
  void ExpectSameInParallel() {
    SliceLog single;
    ASSERT_TRUE(Decode(1, &single, /*cycles_axis=*/true).ok());
    SliceLog parallel;
    absl::StatusOr<decoder::DecodeResult> decoded = Decode(2, &parallel, /*cycles_axis=*/true);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_GT(decoded->stats[decoder::Stat::kJobs], 1u);
    ASSERT_EQ(parallel.threads.size(), single.threads.size());
    for (const auto& [tid, thread] : single.threads) {
      SCOPED_TRACE(absl::StrCat("tid ", tid));
      ASSERT_TRUE(parallel.threads.count(tid));
      const SliceLog::Thread& other = *parallel.threads.at(tid);
      ASSERT_EQ(other.slices.size(), thread->slices.size());
      for (size_t i = 0; i < thread->slices.size(); ++i) {
        const Slice& a = thread->slices[i];
        const Slice& b = other.slices[i];
        ASSERT_TRUE(a.name == b.name && a.begin == b.begin && a.end == b.end && a.parent == b.parent)
            << "slice " << i << ": " << a.name << " [" << a.begin << ", " << a.end << ") vs " << b.name << " ["
            << b.begin << ", " << b.end << ")";
      }
      ASSERT_EQ(other.instants.size(), thread->instants.size());
      for (size_t i = 0; i < thread->instants.size(); ++i) {
        EXPECT_EQ(other.instants[i].time, thread->instants[i].time);
        EXPECT_EQ(other.instants[i].name, thread->instants[i].name);
      }
    }
  }

  // ptd_prog_calls ran in `tid`, whole: its loop calls twice and thrice (by pointer) 50
  // times each and tail_caller 100 times; then fib (how often depends on how the compiler
  // turned its recursion into loops).
  void ExpectProgCallsRanIn(int tid) {
    EXPECT_GT(CallsIn(tid, "fib"), 0u);
    EXPECT_EQ(CallsIn(tid, "twice"), 50u);
    EXPECT_EQ(CallsIn(tid, "thrice"), 50u);
    EXPECT_EQ(CallsIn(tid, "tail_caller"), 100u);
  }

  TempDir tmp_;
  std::string dir_;
  SliceLog log_;
  std::vector<Exec> execs_;
};

class ValgrindExecStacksTest : public ExecStacksTest {
 protected:
  void SetUp() override {
    std::string why;
    if (!ValgrindAvailable(&why)) GTEST_SKIP() << why;
  }
};

// sh runs /bin/true in a child (fork, exec) and then execs /bin/echo itself.
TEST_F(ValgrindExecStacksTest, AShellsExecEndsTheShellAndStartsTheNewProgramAtDepthZero) {
  for (const char* program : {"/bin/sh", "/bin/true", "/bin/echo"}) {
    if (!PathExists(program)) GTEST_SKIP() << program << " not installed";
  }
  Record({"/bin/sh", "-c", "/bin/true; exec /bin/echo x"}, "valgrind");
  if (HasFatalFailure()) return;
  ASSERT_EQ(execs_.size(), 2u);  // the child's true, the shell's echo
  for (const Exec& exec : execs_) ExpectExecEndsTheOldProgram(exec, /*exact=*/true);
  ExpectNothingNestsUnderExecve();
  ExpectSameInParallel();
}

TEST_F(ValgrindExecStacksTest, AForkedChildsExecEndsTheFramesItInherited) {
  ExpectAChildExecsProgCalls("ptd_prog_fork_exec", "valgrind", /*exact=*/true);
}

TEST_F(ValgrindExecStacksTest, APosixSpawnedChildStartsOutsideSpawniChild) {
  ExpectAChildExecsProgCalls("ptd_prog_posix_spawn", "valgrind", /*exact=*/true);
}

// The reader thread dies at the exec: none of its slices outlives it.
TEST_F(ValgrindExecStacksTest, AnExecEndsTheOtherThreadsOfTheProcess) {
  Record({Program("ptd_prog_exec_threads")}, "valgrind");
  if (HasFatalFailure()) return;
  ASSERT_EQ(execs_.size(), 1u);
  const Exec& exec = execs_[0];
  ExpectExecEndsTheOldProgram(exec, /*exact=*/true);
  ExpectNothingNestsUnderExecve();
  ExpectProgCallsRanIn(exec.pid);
  int readers = 0;
  for (const auto& [tid, thread] : log_.threads) {
    if (tid == exec.pid || thread->pid != exec.pid) continue;
    ++readers;
    EXPECT_GT(CallsIn(tid, "blocked_reader"), 0u);
    for (const Slice& s : thread->slices) EXPECT_LE(s.end, exec.time) << "tid " << tid << ": " << s.name;
  }
  EXPECT_EQ(readers, 1);
  ExpectSameInParallel();
}

// The ptrace backend follows the clone(CLONE_VM | CLONE_VFORK) child and its exec.
TEST_F(ExecStacksTest, PtraceBackendPosixSpawnedChildStartsOutsideSpawniChild) {
  ExpectAChildExecsProgCalls("ptd_prog_posix_spawn", "ptrace", /*exact=*/false);
}

}  // namespace
}  // namespace ptd::testing
