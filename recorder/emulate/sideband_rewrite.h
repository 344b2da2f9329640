#pragma once
// Rewrites a sideband file of an emulated recording in place: every record's time through
// the emulator's time map (the kernel stamps CLOCK_MONOTONIC; the trace may be on another
// axis), and, on request, without the kernel's context-switch records (which describe the
// real CPUs, not the emulator's virtual ones). Parsed with sideband/'s reader and written
// back with its builder; bytes after a record the reader cannot parse are kept as they are.

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "sideband/record_reader.h"

namespace ptd {

struct SidebandRewrite {
  // (pid, tid, time) of a record -> its time on the trace's axis; null: times kept.
  std::function<uint64_t(int pid, int tid, uint64_t time)> retime;
  bool drop_switches = false;
};

// The span of the record times written (first > last: none).
struct RewrittenTimes {
  uint64_t first = UINT64_MAX;
  uint64_t last = 0;
};

absl::StatusOr<RewrittenTimes> RewriteSidebandFile(const std::string& path, const RecordFormat& format,
                                                   const SidebandRewrite& rewrite);

}  // namespace ptd
