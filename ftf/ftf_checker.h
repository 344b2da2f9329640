#pragma once
// Structural checks of an FTF event stream, the properties Perfetto needs to show call
// stacks right: Begin/End balanced per thread, Begin/End timestamps non-decreasing per
// thread, every thread with events named by a kernel object record that links it to
// its process (`process` koid argument), every such process named, nesting within
// Perfetto's depth limit. Feed records in file order, then call Finish().

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "ftf/ftf_record.h"

namespace ptd::ftf {

// Perfetto drops slices nested deeper than this (stat slice_max_depth_exceeded).
inline constexpr size_t kPerfettoMaxDepth = 512;

class FtfChecker {
 public:
  // At most `max_problems` are described; the rest are counted.
  explicit FtfChecker(size_t max_problems = 50) : max_problems_(max_problems) {}

  void Add(const FtfRecord& record);
  // Records that the stream could not be read to its end.
  void AddReadError(const std::string& message);
  // Runs the whole-file checks and returns every problem found, in words.
  std::vector<std::string> Finish();
  // Problems found so far, including those not described.
  size_t problem_count() const { return problem_count_; }

 private:
  struct OpenSlice {
    std::string name;
    uint64_t ts = 0;
  };
  struct ThreadState {
    std::vector<OpenSlice> stack;
    uint64_t last_ts = 0;
    bool has_begin_end = false;
    bool depth_reported = false;
    uint64_t first_event_offset = 0;
  };
  struct ThreadObject {
    bool has_process = false;
    uint64_t process = 0;
  };

  void Problem(std::string text);
  void AddEvent(const FtfRecord& record);

  size_t max_problems_;
  size_t problem_count_ = 0;
  std::vector<std::string> problems_;
  // Events are keyed by (pid, tid) as they appear in event records.
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, ThreadState> threads_;
  // Kernel object records: threads by koid (Perfetto keys threads by koid alone).
  absl::flat_hash_map<uint64_t, ThreadObject> thread_objects_;
  absl::flat_hash_set<uint64_t> named_processes_;
};

}  // namespace ptd::ftf
