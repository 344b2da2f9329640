#pragma once
// perf.data -> trace directory (docs/trace-dir.md): PT bytes of each AUX area become
// aux/<stream>.pt with one chunk per AUXTRACE buffer, kernel sideband records are copied
// unchanged into sideband/*.data (one file per sample_type, sorted by time), and
// AUXTRACE_INFO / features fill meta.json, so the ordinary decode pipeline runs on it.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/missing_binaries.h"
#include "common/trace_meta.h"
#include "perfdata/perf_data.h"

namespace ptd::perfdata {

struct PerfImportOptions {
  std::string out_dir;
  bool force = false;                     // replace an existing out_dir
  std::vector<std::string> buildid_dirs;  // searched in order for binaries by build-id
  // After each AUXTRACE buffer copied: PT bytes done so far (a progress bar).
  std::function<void(uint64_t pt_bytes_done)> progress;
};

struct PerfImportResult {
  TraceMeta meta;
  MissingBinaries missing_binaries;  // executable mappings found nowhere
};

// Builds meta.json's content without writing anything (also used by tests).
absl::StatusOr<TraceMeta> PerfDataToMeta(const PerfData& data);

absl::StatusOr<PerfImportResult> ImportPerfData(const PerfData& data, const PerfImportOptions& options);

}  // namespace ptd::perfdata
