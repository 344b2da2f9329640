#pragma once
// Per-function call statistics of nested slices (the latency views of `decode --summary`
// and `ftf-dump --summary`, and later the library's DecodeSummary): calls, inclusive and
// self time and instructions, latency percentiles and a small histogram, and the
// slowest calls of one chosen function. Fed with Begin/End per thread in time order;
// independent of where the slices come from (a decode, or an FTF file's records).

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ptd::ftf {

// Decades of latency for the small histogram: < 100 ns, < 1 us, ... < 100 ms, >= 100 ms.
inline constexpr size_t kLatencyDecades = 8;
inline constexpr std::array<uint64_t, kLatencyDecades - 1> kLatencyDecadeBounds = {
    100, 1'000, 10'000, 100'000, 1'000'000, 10'000'000, 100'000'000 /* then >= 100 ms */};

struct FunctionStats {
  std::string name;
  std::string source;  // "file:line" of its definition (the slices' `source` arg); "" unknown
  uint64_t calls = 0;
  // Time inside the function, counted once for recursive calls (outermost call only).
  uint64_t total_ns = 0;
  // Time inside the function minus time in its direct callees (every call).
  uint64_t self_ns = 0;
  // The same for the `instructions` of the slices' Ends (when every call had one).
  uint64_t total_instructions = 0;
  uint64_t self_instructions = 0;
  bool has_instructions = false;
  // Latency of single calls. Percentiles (nearest rank) are within 1/32 (3 %) of the
  // exact value (the middle of a log-linear bucket), exact below 32 ns; min, max exact.
  uint64_t min_ns = 0;
  uint64_t p50_ns = 0;
  uint64_t p90_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t max_ns = 0;
  std::array<uint64_t, kLatencyDecades> histogram = {};  // calls per decade
  // min..max, the percentiles and the histogram are known (not for a summary without
  // per-call latency: the library's ptd::TraceSummary, the diff's totals).
  bool has_latency = false;
};

struct SlowCall {
  uint64_t pid = 0;
  uint64_t tid = 0;
  uint64_t start_ns = 0;
  uint64_t duration_ns = 0;
  uint64_t instructions = 0;  // 0 when the slice had none
};

struct FunctionStatsSummary {
  std::vector<FunctionStats> functions;  // by total time, longest first
  std::string slowest_of;                // the function asked for ("" none)
  std::vector<SlowCall> slowest;         // its slowest calls, slowest first
};

struct FunctionStatsOptions {
  std::string slowest_of;    // collect this function's slowest calls
  size_t slowest_count = 10;
};

class FunctionStatsBuilder {
 public:
  explicit FunctionStatsBuilder(FunctionStatsOptions options = {});

  // Slices of a thread, nested, in time order. `instructions`: the End's count
  // (callees included), when the slice has one. `source`: the function's definition
  // ("file:line"), when the slice names it; the first one given is kept.
  void Begin(uint64_t pid, uint64_t tid, uint64_t time_ns, absl::string_view name, absl::string_view source = {});
  void End(uint64_t pid, uint64_t tid, uint64_t time_ns, std::optional<uint64_t> instructions);
  // Closes what is still open at `time_ns` (the thread's last timestamp); returns how
  // many slices were open.
  size_t CloseThread(uint64_t pid, uint64_t tid, uint64_t time_ns);
  // Closes every thread at its last Begin/End time.
  FunctionStatsSummary Finish();

 private:
  struct Frame {
    uint32_t function = 0;
    uint64_t start_ns = 0;
    uint64_t callees_ns = 0;
    uint64_t callees_instructions = 0;
  };
  struct Thread {
    std::vector<Frame> stack;
    absl::flat_hash_map<uint32_t, uint32_t> open_count;  // frames open per function
    uint64_t last_ns = 0;
  };
  struct Accumulator {
    FunctionStats stats;
    std::vector<uint64_t> buckets;  // log-linear latency buckets, grown on use
    bool missing_instructions = false;
  };

  Thread& ThreadOf(uint64_t pid, uint64_t tid);
  void Close(uint64_t pid, uint64_t tid, Thread& thread, uint64_t end_ns, std::optional<uint64_t> instructions);
  void NoteSlow(const SlowCall& call);

  FunctionStatsOptions options_;
  std::vector<Accumulator> functions_;
  absl::flat_hash_map<std::string, uint32_t> function_index_;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, Thread> threads_;
  std::optional<uint32_t> slowest_index_;
  std::vector<SlowCall> slowest_;  // min-heap on duration, at most slowest_count
};

// Text for the terminal: the `top` functions by total time with their latency columns,
// and the slowest calls when asked for.
std::string FormatFunctionStats(const FunctionStatsSummary& summary, size_t top);
// {"functions": [{"name", "calls", "total_ns", "self_ns", "total_instructions",
//  "self_instructions", "min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns", "histogram": [...]}],
//  "histogram_bounds_ns": [...], "slowest": {"function", "calls": [{"pid", "tid",
//  "start_ns", "duration_ns", "instructions"}]}}: all functions unless `top` > 0.
std::string FunctionStatsJson(const FunctionStatsSummary& summary, size_t top);
// The inverse of FunctionStatsJson's "functions" (a stored baseline); errors name what is
// missing or malformed.
absl::StatusOr<FunctionStatsSummary> FunctionStatsFromJson(absl::string_view json);

}  // namespace ptd::ftf
