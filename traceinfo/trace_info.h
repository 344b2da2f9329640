#pragma once
// What a trace holds, as `ptrace-direct info` prints it and as a library caller reads it:
// meta.json, the threads, mappings, vDSO dumps, PT streams, sideband files, schedule,
// losses, notes and problems. Reads everything `decode` reads: a trace directory
// (recorded, emulated, or made by `import raw` / `import perf`) and a perf.data in file
// or pipe mode (imported into a temporary trace directory for the purpose).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/missing_binaries.h"
#include "common/trace_meta.h"
#include "nlohmann/json.hpp"
#include "sideband/sideband_set.h"

namespace ptd::traceinfo {

struct TraceInfoOptions {
  // perf.data input: build-id caches searched for binaries (then ~/.debug).
  std::vector<std::string> buildid_dirs;
};

struct TraceInfo {
  std::string input;       // as given
  std::string input_kind;  // "trace_dir" or "perf.data"
  TraceMeta meta;
  Sideband sideband;       // loaded with keep_going: sources[i].error says what failed
  // The model `info --json` prints (keys: trace_dir, input_kind, mode, host, threads,
  // mmaps, vdso, images, streams, archive, sideband, schedule, lost, notes, problems; docs/cli.md).
  nlohmann::ordered_json json;
  // perf.data input: executable mappings whose binary was found nowhere.
  MissingBinaries missing_binaries;
};

// Reads `input`: a trace directory or a perf.data file. Errors name the file.
absl::StatusOr<TraceInfo> ReadTraceInfo(const std::string& input, const TraceInfoOptions& options = {});

}  // namespace ptd::traceinfo
