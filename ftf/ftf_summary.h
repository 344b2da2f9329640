#pragma once
// What an FTF file holds, for a quick look in a terminal: threads, slices per thread, and
// the functions (slice names) that take the most total and self time.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ftf/ftf_record.h"

namespace ptd::ftf {

struct FunctionTime {
  std::string name;
  uint64_t calls = 0;
  // Time inside the function, counted once for recursive calls (outermost call only).
  uint64_t total_ns = 0;
  // Time inside the function minus time in its callees.
  uint64_t self_ns = 0;
};

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
  std::vector<FunctionTime> functions;   // by total time, longest first
};

// Builds a summary from records fed in file order.
class FtfSummarizer {
 public:
  void Add(const FtfRecord& record);
  FtfSummary Finish();

 private:
  struct Frame {
    uint32_t function = 0;
    uint64_t start_ns = 0;
    uint64_t callees_ns = 0;
  };
  struct ThreadState {
    ThreadSummary summary;
    std::vector<Frame> stack;
    // How many frames of each function are open: total time counts the outermost only.
    absl::flat_hash_map<uint32_t, uint32_t> open_count;
    bool has_events = false;
  };

  uint64_t ToNs(uint64_t ticks) const;
  uint32_t FunctionIndex(const std::string& name);
  void CloseFrame(ThreadState& thread, uint64_t end_ns);

  FtfSummary summary_;
  uint64_t ticks_per_second_ = 1'000'000'000;
  std::vector<FunctionTime> functions_;
  absl::flat_hash_map<std::string, uint32_t> function_index_;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, ThreadState> threads_;
  absl::flat_hash_map<uint64_t, std::string> thread_names_;
  absl::flat_hash_map<uint64_t, std::string> process_names_;
};

// Reads a whole file (plain or gzip) and summarizes it.
absl::StatusOr<FtfSummary> SummarizeFtfFile(const std::string& path);

// Text for the terminal: threads, then the `top_functions` longest functions by total time
// and by self time.
std::string FormatFtfSummary(const FtfSummary& summary, size_t top_functions);

}  // namespace ptd::ftf
