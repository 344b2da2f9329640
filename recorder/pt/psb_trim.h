#pragma once
// `record --trim` on Intel PT hardware, once the recording has ended and its streams are
// on disk: each AUX stream (per thread or per CPU) keeps only what follows its last PSB
// whose PSB+ time is at or before the trigger's entry. The PSBs and their TSC come from
// the bytes (common/pt_psb.h), converted to the perf clock with meta.json's time
// conversion, the one the breakpoint samples that timed the trigger are stamped with.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/trace_meta.h"

namespace ptd::pt {

struct PsbTrimResult {
  size_t streams_cut = 0;    // cut at a PSB
  size_t streams_whole = 0;  // no timed PSB at or before the time (or the first one is)
  uint64_t bytes_dropped = 0;
};

// Cuts the stream files of `meta` under `dir` at their last PSB timed at or before
// `from_ns` (perf clock) and re-bases their chunks (recorder/session/stream_cut.h). A stream is
// scanned chunk by chunk and up to its first PSB timed after `from_ns`. The first error
// stops it; streams cut before stay cut (each file and its chunks change together).
absl::StatusOr<PsbTrimResult> TrimStreamsAtPsb(const std::string& dir, uint64_t from_ns, TraceMeta* meta);

}  // namespace ptd::pt
