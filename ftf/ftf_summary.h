#pragma once
// What an FTF file holds, for a quick look in a terminal: threads, slices per thread, and
// per function (slice name) calls, times, instructions and latency (ftf/function_stats.h).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ftf/ftf_record.h"
#include "ftf/function_stats.h"

namespace ptd::ftf {

struct ThreadSummary {
  uint64_t pid = 0;
  uint64_t tid = 0;
  std::string name;          // from the thread's kernel object record, "" if none
  std::string process_name;  // from the process's kernel object record, "" if none
  uint64_t slices = 0;       // begin/end pairs and complete events
  uint64_t instants = 0;
  uint64_t counters = 0;
  uint64_t unfinished = 0;   // slices still open at the end (closed at the last timestamp)
  uint64_t unmatched_ends = 0;
  size_t max_depth = 0;
  uint64_t first_ts_ns = 0;
  uint64_t last_ts_ns = 0;
};

struct FtfSummary {
  uint64_t records = 0;
  uint64_t events = 0;
  uint64_t ticks_per_second = 0;
  std::vector<ThreadSummary> threads;    // by pid, tid
  FunctionStatsSummary functions;  // by total time, longest first
};

// Builds a summary from records fed in file order.
class FtfSummarizer {
 public:
  explicit FtfSummarizer(FunctionStatsOptions function_options = {}) : functions_(std::move(function_options)) {}
  void Add(const FtfRecord& record);
  FtfSummary Finish();

 private:
  struct ThreadState {
    ThreadSummary summary;
    size_t depth = 0;  // Begin/End slices open
    bool has_events = false;
  };

  uint64_t ToNs(uint64_t ticks) const;

  FtfSummary summary_;
  uint64_t ticks_per_second_ = 1'000'000'000;
  FunctionStatsBuilder functions_;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, ThreadState> threads_;
  absl::flat_hash_map<uint64_t, std::string> thread_names_;
  absl::flat_hash_map<uint64_t, std::string> process_names_;
};

// Reads a whole file (plain or gzip) and summarizes it.
absl::StatusOr<FtfSummary> SummarizeFtfFile(const std::string& path);

// Text for the terminal: threads, then the `top_functions` longest functions by total time
// (with latency) and by self time, and the slowest calls when asked for.
std::string FormatFtfSummary(const FtfSummary& summary, size_t top_functions);

}  // namespace ptd::ftf
