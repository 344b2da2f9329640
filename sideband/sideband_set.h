#pragma once
// All sideband of a trace directory: every file listed in meta.json parsed with its own
// sample_type, merged by time (synthesized records first), and turned into the memory-map
// timeline, the CPU schedule and the thread table the decoder needs.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/trace_meta.h"
#include "sideband/cpu_schedule.h"
#include "sideband/mmap_timeline.h"
#include "sideband/perf_record.h"
#include "sideband/thread_names.h"

namespace ptd {

// A record in the merged, time-ordered sequence.
struct MergedRecord {
  uint64_t time_ns = 0;  // sample_id time, or the previous record's of the same source
  int source = 0;        // index into Sideband::sources
  PerfRecord record;
};

struct SidebandSourceInfo {
  std::string file;        // as in meta.json (or a name given by the caller)
  bool synthesized = false;
  int cpu = -1;
  int tid = -1;
  uint64_t bytes = 0;
  uint64_t records = 0;
  absl::Status error;      // parse error (only kept with keep_going)
};

struct SidebandStats {
  uint64_t records = 0;
  uint64_t lost_records = 0;   // sum of PERF_RECORD_LOST.lost (+ meta lost_records
                               // when no LOST record was kept)
  uint64_t lost_samples = 0;   // sum of PERF_RECORD_LOST_SAMPLES.lost
  uint64_t other_records = 0;  // not modelled, skipped
  uint64_t aux_records = 0;
  uint64_t aux_truncated = 0, aux_partial = 0, aux_collision = 0, aux_overwrite = 0;
  uint64_t parse_errors = 0;   // sources cut short by a bad record (keep_going)
  uint64_t records_without_time = 0;
};

struct Sideband {
  std::vector<SidebandSourceInfo> sources;
  std::vector<MergedRecord> records;  // every parsed record, time order
  MmapTimeline mmaps;
  CpuSchedule schedule;
  ThreadTable threads;
  SidebandStats stats;
  std::vector<std::string> problems;  // readable descriptions of what went wrong
};

struct SidebandLoadOptions {
  // false: the first bad file or record is the error. true: keep the records read before
  // it, record the error in sources[i].error / problems / stats, and go on.
  bool keep_going = false;
};

absl::StatusOr<Sideband> LoadSideband(const std::string& trace_dir, const TraceMeta& meta,
                                      const SidebandLoadOptions& options = {});

// For importers and tests: already parsed sources (records in their read order).
struct SidebandSource {
  SidebandSourceInfo info;
  std::vector<PerfRecord> records;
};
Sideband BuildSideband(std::vector<SidebandSource> sources);

}  // namespace ptd
