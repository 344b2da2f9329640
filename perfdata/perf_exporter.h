#pragma once
// Trace directory -> file-mode perf.data that `perf script --itrace=b` decodes: one
// intel_pt event attr (the PMU type perf needs comes from AUXTRACE_INFO and the attr,
// not from the decoding machine, so it works where no intel_pt PMU exists), the
// AUXTRACE_INFO record, one AUXTRACE record per chunk, the sideband records with their
// sample_id rewritten to this attr, HEADER_BUILD_ID, and a build-id cache directory
// holding the vDSO dumps and binaries (pass it as `perf --buildid-dir`).

#include <string>

#include "absl/status/statusor.h"
#include "common/trace_meta.h"

namespace ptd::perfdata {

struct PerfExportOptions {
  std::string trace_dir;
  std::string output;       // perf.data to write
  std::string buildid_dir;  // build-id cache to fill; empty: <output>.buildid
};

struct PerfExportResult {
  std::string buildid_dir;
  size_t aux_records = 0;
  size_t sideband_records = 0;
  size_t cached_binaries = 0;
  std::vector<std::string> notes;  // images that could not be cached, skipped records
};

// perf_event_attr.type used when the trace has no recorded PMU type (emulated traces).
inline constexpr int kExportDefaultPtPmuType = 8;
// The id we give the single event; sideband sample_ids are rewritten to it.
inline constexpr uint64_t kExportEventId = 1;

absl::StatusOr<PerfExportResult> ExportPerfData(const PerfExportOptions& options);

}  // namespace ptd::perfdata
