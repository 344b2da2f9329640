#pragma once
// Decodes a whole trace directory: reads meta.json and the sideband, builds one process
// image per process over one shared section cache, runs a FlowDecoder per stream and
// a CallStackModel per thread, and hands slices to per-thread sinks (FTF in the product).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/missing_binaries.h"
#include "ftf/function_stats.h"
#include "decoder/output/detail_filter.h"
#include "decoder/flow/flow_decoder.h"
#include "decoder/output/slice_sink.h"
#include "decoder/stats.h"

namespace ptd::decoder {

class CoverageCollector;

enum class TimeAxisChoice { kTime, kCycles, kInstructions };

// `decode --window` / `--window-offset`: decode only the PSB intervals that cover a time
// or byte range of every stream (decoder/packets/psb_window.h), not the trace from its start.
struct DecodeWindow {
  enum class Kind { kNone, kTime, kOffset };
  Kind kind = Kind::kNone;
  uint64_t begin = 0;          // ns (output time units) or stream byte offset
  uint64_t end = UINT64_MAX;   // exclusive
  // kTime: begin and end count from the trace's first PSB time (the "+" form).
  bool relative = false;
};

struct DecodeOptions {
  DecoderKind decoder = DecoderKind::kFast;
  TimeAxisChoice axis = TimeAxisChoice::kTime;
  std::optional<int> tid;                 // only this thread
  uint64_t window_begin = 0;              // keep slices beginning in [begin, end)
  uint64_t window_end = UINT64_MAX;
  bool progress = false;                  // progress bar on stderr (common/progress_bar.h)
  std::string progress_label = "decoding";
  std::string debug_root = "/usr/lib/debug";
  // Fetch the debug files of stripped code files with no local debug info from the
  // servers in DEBUGINFOD_URLS (image/debuginfod_fetcher.h); off when it is unset.
  bool debuginfod = true;
  // Inlined calls as slices nested in their callers' (DWARF, where the code file or its
  // debug file has it); off: a function's inlined code is its own.
  bool inlined_frames = true;
  BlockObserver* block_observer = nullptr;  // tests: sees every instruction run (forces jobs 1)
  // Tests: sees every flow event of every stream before the call-stack model does, in
  // stream order (forces jobs 1). The differential test compares decoders with it.
  FlowConsumer* flow_observer = nullptr;
  // Threads decoding: 1 decodes each stream with one libipt decoder, in order; more cut
  // streams at PSBs into pieces decoded in parallel (docs/decoder.md). Same output.
  // 0: one per core, once the trace holds kMinParallelBytes of PT (below, one).
  int jobs = 1;
  static constexpr uint64_t kMinParallelBytes = uint64_t{2} << 20;
  uint64_t piece_bytes = 0;                  // parallel: PT bytes per piece (0: automatic)
  const std::atomic<bool>* cancel = nullptr;  // turns true (SIGINT): stop, close, mark
  // Level of detail of what reaches the sinks (--min-duration, --max-depth): see
  // decoder/output/detail_filter.h; counts of dropped slices in DecodeResult::stats.
  DetailOptions detail;
  DecodeWindow window;
  // DecodeTraceToFtf only: the largest FTF file wanted (0: no limit). The detail is
  // chosen to fit (decoder/output/output_size_plan.h): a counting decode, then the real one
  // (again, smaller, when an estimate was off); the choice is described in `notes`.
  uint64_t max_output_bytes = 0;
  // When set, sees every slice at full detail (before `detail`): --summary.
  ftf::FunctionStatsBuilder* function_stats = nullptr;
  // When set, counts every instruction run of every stream, in the image it ran in
  // (`coverage`; with jobs > 1 each piece's runs, for the pieces used; one thread with
  // DecoderKind::kBlock). Replaces block_observer.
  CoverageCollector* coverage = nullptr;
};

struct DecodeResult {
  // Every decoder's, call-stack model's and level-of-detail filter's counters, merged.
  Stats stats;
  double seconds = 0;
  // A parallel decode's pieces, in the order they were handed out (empty with one decoder
  // per stream); their totals are in `stats` (pieces, piece_cpu_ns).
  std::vector<PieceCost> pieces;
  bool has_cycles = false;  // some stream had CYC packets
  std::vector<std::string> warnings;
  MissingBinaries missing_binaries;  // mapped, not on this machine: their code is not decoded
  bool time_axis_is_instructions = false;
  bool time_axis_is_cycles = false;  // --time-axis cycles, for the streams with CYC
  // Stopped by `cancel`: every open slice was closed and each thread got a
  // "decode interrupted" instant; the output is partial.
  bool interrupted = false;
  // What the decode chose to do, for the user (the window's byte ranges and times).
  std::vector<std::string> notes;
  // Files meta.json lists that the trace directory no longer holds (a sideband file, a
  // thread's PT stream): the output is valid but lacks what they held, and the CLI exits 1.
  std::vector<std::string> missing_files;
};

// Makes the slice sink of a thread; called once per thread before its first slice.
class ThreadSinkFactory {
 public:
  virtual ~ThreadSinkFactory() = default;
  virtual SliceSink* ForThread(int pid, int tid, const std::string& thread_name,
                               const std::string& process_name) = 0;
};

absl::StatusOr<DecodeResult> DecodeTrace(const std::string& trace_dir, const DecodeOptions& options,
                                         ThreadSinkFactory* sinks);

// The `decode` command: FTF (gzip when the name ends in .gz) with one track per thread;
// `output` empty: no file (the decode is for options.function_stats).
absl::StatusOr<DecodeResult> DecodeTraceToFtf(const std::string& trace_dir, const std::string& output,
                                              const DecodeOptions& options);

// `diff -o`: traces decoded into one FTF file side by side, each with its own options
// (its function_stats, say): every thread of a trace under one process named `name`
// (koid (i + 1) << 22 for the i-th run, its threads' koids that plus their tids; each
// thread's name ends in its tid), its slices as DecodeTraceToFtf writes them. One
// result per run, in order.
struct FtfRun {
  std::string trace_dir;
  std::string name;
  DecodeOptions options;
};
absl::StatusOr<std::vector<DecodeResult>> DecodeTracesToOneFtf(const std::vector<FtfRun>& runs,
                                                               const std::string& output);

// `decode --stats-json`: every counter of `result.stats` by its key (decoder/stats.h),
// "seconds", and each piece's cost ("piece_bytes_each", "piece_cpu_ns_each",
// "piece_serial_cpu_ns_each"); "cycles" only when the trace has CYC.
std::string DecodeStatsJson(const DecodeResult& result);

// `--decoder`: fast, libipt-block or libipt-insn ("block" and "insn", the names before
// the fast decoder came, too).
absl::StatusOr<DecoderKind> ParseDecoderKind(absl::string_view name);

// The decoding threads for DecodeOptions::jobs = `asked` (0: one per core of `cores`,
// but one for traces under kMinParallelBytes of PT).
int DecodeJobs(int asked, uint64_t pt_bytes, unsigned cores);

}  // namespace ptd::decoder
