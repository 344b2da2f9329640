#pragma once
// The decode's counters, by name: one registry type instead of a counter struct per layer.
// Every counter is declared once below (key, how two registries combine, meaning); a
// flow decoder, a call-stack model and a level-of-detail filter each count into a Stats
// of their own (they run on different threads), and the decode merges them into the
// summary that `decode --stats-json` prints under these keys.

#include <array>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace ptd::decoder {

// X(name, key, merge, meaning); merge: kSum adds, kMax keeps the larger.
#define PTD_DECODE_STATS(X)                                                                          \
  X(kInstructions, "instructions", kSum, "instructions decoded")                                      \
  X(kBlocks, "blocks", kSum, "blocks (block decoders) or branches (instruction decoder)")             \
  X(kTraceletBlocks, "tracelet_blocks", kSum, "blocks the fast decoder took through its tracelet cache") \
  X(kCrossedBranches, "quick_run_crossed_branches", kSum, "calls, returns, indirect jumps and jumps out of a function inside the fast decoder's quick runs") \
  X(kFastRunsShared, "fast_block_summaries_shared", kSum,                                             \
    "fast decoder's runs of code another stream had decoded (section_block_cache.h)")                 \
  X(kFastRunsDecoded, "fast_block_summaries_decoded", kSum, "fast decoder's runs of code it decoded itself") \
  X(kCalls, "calls", kSum, "call events the call-stack models took")                                  \
  X(kReturns, "returns", kSum, "return events the call-stack models took")                            \
  X(kErrors, "errors", kSum, "decode errors")                                                         \
  X(kOverflows, "overflows", kSum, "trace overflows (OVF)")                                           \
  X(kThreads, "threads", kSum, "threads with a call-stack model")                                     \
  X(kSegments, "segments", kSum, "stretches of a thread's trace decoded without a break")             \
  X(kLost, "lost", kSum, "gaps between chunks (lost trace data)")                                     \
  X(kSyncs, "syncs", kSum, "synchronizations on a PSB")                                               \
  X(kBytes, "bytes", kSum, "PT bytes decoded")                                                        \
  X(kJobs, "jobs", kMax, "threads that decoded the trace (more than 1: in pieces, in parallel)")       \
  X(kUndecodable, "undecodable", kSum, "instructions Zydis could not classify")                   \
  X(kDroppedShort, "dropped_short", kSum, "slices left out as shorter than --min-duration")          \
  X(kDroppedDeep, "dropped_deep", kSum, "slices left out as deeper than --max-depth")                 \
  X(kDetailKept, "detail_kept", kSum, "slices the level-of-detail filter (when on) kept")            \
  X(kTailCalls, "tail_calls", kSum, "jumps out of a function taken as tail calls")                    \
  X(kUnwinds, "unwinds", kSum, "returns and jumps that ended more than one frame")                    \
  X(kInferredFrames, "inferred_frames", kSum, "frames begun for code seen running, not called")      \
  X(kFoldedFrames, "folded_frames", kSum, "frames hidden beyond the depth limit")                     \
  X(kMaxDepth, "max_depth", kMax, "deepest call stack of a thread")                                  \
  X(kGoroutineSwitches, "goroutine_switches", kSum, "Go: stacks parked (mcall, morestack) or resumed (gogo)") \
  X(kGoroutinesStarted, "goroutines_started", kSum, "Go: gogo to a function's entry (a new goroutine)")   \
  X(kGoroutinesUnknown, "goroutines_unknown", kSum, "Go: gogo to a PC with no parked stack (inferred)")    \
  X(kGoroutineSwaps, "goroutine_swaps", kSum, "Go: a resume's FIFO choice corrected by a return")          \
  X(kGoroutineStacksDropped, "goroutine_stacks_dropped", kSum, "Go: parked stacks dropped at the bound")  \
  X(kCycles, "cycles", kSum, "CYC payloads of the streams that have CYC packets")

enum class Stat : uint8_t {
#define PTD_STAT_ENUM(name, key, merge, meaning) name,
  PTD_DECODE_STATS(PTD_STAT_ENUM)
#undef PTD_STAT_ENUM
      kCount
};

inline constexpr size_t kStatCount = static_cast<size_t>(Stat::kCount);

class Stats {
 public:
  // The key `--stats-json` prints it under.
  static absl::string_view Key(Stat stat);

  void Add(Stat stat, uint64_t n = 1) { values_[Index(stat)] += n; }
  void Set(Stat stat, uint64_t value) { values_[Index(stat)] = value; }
  void RaiseTo(Stat stat, uint64_t value) {
    uint64_t& v = values_[Index(stat)];
    if (value > v) v = value;
  }
  uint64_t operator[](Stat stat) const { return values_[Index(stat)]; }

  // Each counter combined by its merge rule.
  void Merge(const Stats& other);
  // What was counted since `before` (a copy of this registry taken earlier).
  Stats Since(const Stats& before) const;

 private:
  static constexpr size_t Index(Stat stat) { return static_cast<size_t>(stat); }
  std::array<uint64_t, kStatCount> values_{};
};

}  // namespace ptd::decoder
