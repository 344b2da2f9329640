#pragma once
// Test helper: every sideband record of a committed trace directory, with the file it
// came from, parsed with the sideband module's reader.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/trace_meta.h"
#include "sideband/perf_record.h"

namespace ptd::testing {

struct LoadedRecord {
  PerfRecord record;
  std::string file;
  std::string origin;  // "kernel" or "synthesized"
};

struct RecordedSideband {
  TraceMeta meta;
  std::vector<LoadedRecord> records;  // file order (meta.json order, then byte order)
};

absl::StatusOr<RecordedSideband> LoadRecordedSideband(const std::string& trace_dir);

}  // namespace ptd::testing
