// The public decode API (decoder/include/ptd/decoder.h) over DecodeTrace: the same
// pipeline as `ptrace-direct decode`, with per-thread sinks that sum up or forward.
#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "decoder/trace_decoder.h"
#include "ptd/decoder.h"

namespace ptd {
namespace {

absl::StatusOr<decoder::DecodeOptions> InternalOptions(const DecodeOptions& options) {
  if (options.jobs < 0) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeOptions.jobs = ", options.jobs,
                                                   ": want 1 or more (0: one per core)"));
  }
  if (options.window_begin > options.window_end) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeOptions.window_begin ", options.window_begin,
                                                   " is after window_end ", options.window_end));
  }
  decoder::DecodeOptions internal;
  switch (options.decoder) {
    case DecodeOptions::Decoder::kBlock: internal.decoder = decoder::DecoderKind::kBlock; break;
    case DecodeOptions::Decoder::kInsn: internal.decoder = decoder::DecoderKind::kInsn; break;
    case DecodeOptions::Decoder::kFast: internal.decoder = decoder::DecoderKind::kFast; break;
  }
  switch (options.time_axis) {
    case DecodeOptions::TimeAxis::kTime: internal.axis = decoder::TimeAxisChoice::kTime; break;
    case DecodeOptions::TimeAxis::kCycles: internal.axis = decoder::TimeAxisChoice::kCycles; break;
    case DecodeOptions::TimeAxis::kInstructions: internal.axis = decoder::TimeAxisChoice::kInstructions; break;
  }
  internal.tid = options.tid;
  internal.window_begin = options.window_begin;
  internal.window_end = options.window_end;
  internal.debug_root = options.debug_root;
  internal.inlined_frames = options.inlined_frames;
  internal.jobs = options.jobs;
  return internal;
}

DecodeTotals Totals(const decoder::DecodeResult& result) {
  DecodeTotals totals;
  using decoder::Stat;
  const decoder::Stats& s = result.stats;
  totals.instructions = s[Stat::kInstructions];
  totals.calls = s[Stat::kCalls];
  totals.returns = s[Stat::kReturns];
  totals.errors = s[Stat::kErrors];
  totals.overflows = s[Stat::kOverflows];
  totals.lost = s[Stat::kLost];
  totals.threads = s[Stat::kThreads];
  totals.seconds = result.seconds;
  totals.time_is_instructions = result.time_axis_is_instructions;
  totals.warnings = result.warnings;
  return totals;
}

// Forwards one thread's slices beginning in the window to the caller's sink; one lock for
// all threads so the caller never sees concurrent calls.
class ForwardingSink : public decoder::SliceSink {
 public:
  ForwardingSink(DecodeSink* sink, std::mutex* mu, int tid, const decoder::DecodeOptions& options)
      : sink_(sink), mu_(mu), tid_(tid), begin_(options.window_begin), end_(options.window_end) {}
  void Begin(uint64_t time, absl::string_view name) override {
    const bool inside = InWindow(time);
    open_.push_back(inside);
    if (!inside) return;
    std::lock_guard<std::mutex> lock(*mu_);
    sink_->SliceBegin(tid_, time, std::string_view(name.data(), name.size()));
  }
  void End(uint64_t time, const decoder::SliceCounts& counts) override {
    const bool inside = !open_.empty() && open_.back();
    if (!open_.empty()) open_.pop_back();
    if (!inside) return;
    std::lock_guard<std::mutex> lock(*mu_);
    sink_->SliceEnd(tid_, time, counts.instructions, counts.has_cycles ? counts.cycles : 0);
  }
  void Instant(uint64_t time, absl::string_view name, absl::string_view detail) override {
    if (!InWindow(time)) return;
    std::lock_guard<std::mutex> lock(*mu_);
    sink_->Instant(tid_, time, std::string_view(name.data(), name.size()),
                   std::string_view(detail.data(), detail.size()));
  }

 private:
  bool InWindow(uint64_t time) const { return time >= begin_ && time < end_; }

  DecodeSink* sink_;
  std::mutex* mu_;
  int tid_;
  uint64_t begin_;
  uint64_t end_;
  std::vector<bool> open_;  // per open slice: forwarded
};

class ForwardingSinks : public decoder::ThreadSinkFactory {
 public:
  ForwardingSinks(DecodeSink* sink, const decoder::DecodeOptions& options) : sink_(sink), options_(options) {}
  decoder::SliceSink* ForThread(int pid, int tid, const std::string& thread_name,
                                const std::string& process_name) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      sink_->Thread(pid, tid, thread_name, process_name);
    }
    sinks_.push_back(std::make_unique<ForwardingSink>(sink_, &mu_, tid, options_));
    return sinks_.back().get();
  }

 private:
  DecodeSink* sink_;
  const decoder::DecodeOptions& options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<ForwardingSink>> sinks_;
};

// Sums one thread's slices into per-function figures.
class SummarySink : public DecodeSink {
 public:
  SummarySink(const DecodeOptions& options, TraceSummary* summary) : options_(options), summary_(summary) {}

  void Thread(int pid, int tid, std::string_view thread_name, std::string_view) override {
    ThreadSummary& thread = summary_->threads[tid];
    thread.pid = pid;
    thread.tid = tid;
    thread.name = std::string(thread_name);
  }
  void SliceBegin(int tid, uint64_t time, std::string_view function) override {
    State& state = states_[tid];
    Frame frame;
    frame.name = std::string(function);
    frame.begin = time;
    frame.counted = time >= options_.window_begin && time < options_.window_end;
    frame.outermost = state.active[frame.name]++ == 0;
    state.stack.push_back(std::move(frame));
  }
  void SliceEnd(int tid, uint64_t time, uint64_t instructions, uint64_t) override {
    State& state = states_[tid];
    if (state.stack.empty()) return;
    Frame frame = std::move(state.stack.back());
    state.stack.pop_back();
    --state.active[frame.name];
    const uint64_t inclusive_time = time >= frame.begin ? time - frame.begin : 0;
    if (!state.stack.empty()) {
      state.stack.back().child_time += inclusive_time;
      state.stack.back().child_instructions += instructions;
    }
    if (!frame.counted) return;
    for (std::map<std::string, FunctionSummary>* functions :
         {&summary_->functions, &summary_->threads[tid].functions}) {
      FunctionSummary& f = (*functions)[frame.name];
      ++f.calls;
      f.self_time += inclusive_time - std::min(inclusive_time, frame.child_time);
      f.self_instructions += instructions - std::min(instructions, frame.child_instructions);
      if (frame.outermost) {
        f.inclusive_time += inclusive_time;
        f.inclusive_instructions += instructions;
      }
    }
  }
  void Instant(int tid, uint64_t time, std::string_view name, std::string_view detail) override {
    DecodeIssue issue{tid, time, std::string(name), std::string(detail)};
    summary_->threads[tid].issues.push_back(issue);
    summary_->issues.push_back(std::move(issue));
  }

 private:
  struct Frame {
    std::string name;
    uint64_t begin = 0;
    uint64_t child_time = 0;
    uint64_t child_instructions = 0;
    bool counted = false;
    bool outermost = false;
  };
  struct State {
    std::vector<Frame> stack;
    std::map<std::string, int> active;  // open activations per function (recursion)
  };
  const DecodeOptions& options_;
  TraceSummary* summary_;
  std::map<int, State> states_;
};

}  // namespace

absl::StatusOr<DecodeTotals> DecodeToSink(const std::string& trace_dir, DecodeSink& sink,
                                          const DecodeOptions& options) {
  absl::StatusOr<decoder::DecodeOptions> internal = InternalOptions(options);
  if (!internal.ok()) return internal.status();
  ForwardingSinks sinks(&sink, *internal);
  absl::StatusOr<decoder::DecodeResult> result = decoder::DecodeTrace(trace_dir, *internal, &sinks);
  if (!result.ok()) return result.status();
  return Totals(*result);
}

absl::StatusOr<TraceSummary> DecodeSummary(const std::string& trace_dir, const DecodeOptions& options) {
  TraceSummary summary;
  SummarySink sink(options, &summary);
  // The window is applied by the summary (a slice counts when it begins inside), so the
  // whole stack is seen.
  DecodeOptions unwindowed = options;
  unwindowed.window_begin = 0;
  unwindowed.window_end = UINT64_MAX;
  if (options.window_begin > options.window_end) return InternalOptions(options).status();
  absl::StatusOr<DecodeTotals> totals = DecodeToSink(trace_dir, sink, unwindowed);
  if (!totals.ok()) return totals.status();
  summary.totals = *std::move(totals);
  return summary;
}

absl::StatusOr<DecodeTotals> DecodeToFtf(const std::string& trace_dir, const std::string& output,
                                         const DecodeOptions& options) {
  absl::StatusOr<decoder::DecodeOptions> internal = InternalOptions(options);
  if (!internal.ok()) return internal.status();
  absl::StatusOr<decoder::DecodeResult> result = decoder::DecodeTraceToFtf(trace_dir, output, *internal);
  if (!result.ok()) return result.status();
  return Totals(*result);
}

}  // namespace ptd
