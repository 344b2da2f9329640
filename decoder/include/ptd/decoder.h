#pragma once
// libdecoder: decoding a trace directory (ptd::Recorder::WriteTo, `ptrace-direct record`)
// from C++ (docs/library.md).
//
//   absl::StatusOr<ptd::TraceSummary> summary = ptd::DecodeSummary("run.trace");
//   EXPECT_EQ(summary->functions.at("parse").calls, 40u);
//
// DecodeSummary answers "how many calls, how many instructions, how long" per function
// and per thread; DecodeToSink hands over every slice and instant event; DecodeToFtf
// writes what `ptrace-direct decode` writes. CMake: find_package(ptrace_direct) and link
// ptd::decoder; pkg-config: ptrace-direct.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ptd {

struct DecodeOptions {
  // libipt's block or instruction decoder, or the fast one (libipt's query decoder under
  // its own block cache); all give the same result.
  enum class Decoder { kBlock, kInsn, kFast };
  enum class TimeAxis {
    kTime,          // ns (of the trace's clock)
    kCycles,        // CPU cycles from CYC packets (streams without them: time)
    kInstructions,  // instructions executed on the thread
  };
  Decoder decoder = Decoder::kFast;
  TimeAxis time_axis = TimeAxis::kTime;
  int jobs = 1;  // decoding threads; 0: one per core (one below 2 MiB of PT). Same result for every value.
  // Filters: only this thread; only slices beginning in [window_begin, window_end) on
  // the time axis.
  std::optional<int> tid;
  uint64_t window_begin = 0;
  uint64_t window_end = UINT64_MAX;
  std::string debug_root = "/usr/lib/debug";  // where separate debug files are looked up
  // Inlined calls as slices nested in their caller's, from the DWARF of the code file or
  // its debug file; false: a function's inlined code counts as its own.
  bool inlined_frames = true;
};

// One function (or marker slice: "[syscall]", "[untraced]", "[deeper frames folded]").
// Time is on the chosen time axis. Inclusive figures count a recursive function once per
// outermost activation; self figures exclude the callees.
struct FunctionSummary {
  uint64_t calls = 0;  // activations (slices) of the function
  uint64_t inclusive_instructions = 0;
  uint64_t self_instructions = 0;
  uint64_t inclusive_time = 0;
  uint64_t self_time = 0;
};

// A decode error, overflow or lost-data marker: where the call stacks had to restart.
struct DecodeIssue {
  int tid = 0;
  uint64_t time = 0;
  std::string name;    // "decode error", "trace overflow" or "lost trace data"
  std::string detail;  // libipt's message and trace offset, when there is one
};

struct ThreadSummary {
  int pid = 0;
  int tid = 0;
  std::string name;  // the thread's command name
  std::map<std::string, FunctionSummary> functions;
  std::vector<DecodeIssue> issues;
};

struct DecodeTotals {
  uint64_t instructions = 0;
  uint64_t calls = 0;
  uint64_t returns = 0;
  uint64_t errors = 0;     // decode errors
  uint64_t overflows = 0;  // hardware (or emulated) buffer overflows
  uint64_t lost = 0;       // gaps between trace chunks (snapshots, truncation)
  uint64_t threads = 0;
  double seconds = 0;      // decoding wall time
  bool time_is_instructions = false;  // no timing in the trace: time axis = instructions
  std::vector<std::string> warnings;
};

struct TraceSummary {
  std::map<std::string, FunctionSummary> functions;  // all threads together
  std::map<int, ThreadSummary> threads;              // by tid
  std::vector<DecodeIssue> issues;                   // all threads, in decode order
  DecodeTotals totals;
};

// Every event of the decoded call stacks. Calls for one thread come in order (each
// SliceEnd closes the innermost open SliceBegin); calls are never concurrent.
class DecodeSink {
 public:
  virtual ~DecodeSink() = default;
  // Before the thread's first event.
  virtual void Thread(int pid, int tid, std::string_view thread_name, std::string_view process_name) {
    (void)pid, (void)tid, (void)thread_name, (void)process_name;
  }
  virtual void SliceBegin(int tid, uint64_t time, std::string_view function) = 0;
  // `instructions` (and `cycles` when the trace has CYC) executed in the slice, callees
  // included.
  virtual void SliceEnd(int tid, uint64_t time, uint64_t instructions, uint64_t cycles) = 0;
  virtual void Instant(int tid, uint64_t time, std::string_view name, std::string_view detail) {
    (void)tid, (void)time, (void)name, (void)detail;
  }
};

// Errors (a Status, never an abort): a missing or unreadable trace directory (the
// message names it), bad options (naming the field).
absl::StatusOr<TraceSummary> DecodeSummary(const std::string& trace_dir, const DecodeOptions& options = {});
absl::StatusOr<DecodeTotals> DecodeToSink(const std::string& trace_dir, DecodeSink& sink,
                                          const DecodeOptions& options = {});
// FTF for Perfetto (gzip when `output` ends in .gz).
absl::StatusOr<DecodeTotals> DecodeToFtf(const std::string& trace_dir, const std::string& output,
                                         const DecodeOptions& options = {});

}  // namespace ptd
