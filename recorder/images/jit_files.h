#pragma once
// What JIT runtimes write about their code, copied into the trace directory when a
// recording ends (the runtime may delete its files, and the decode may run elsewhere):
// every jitdump the sideband shows mapped (jit-PID.dump, perf's convention: the runtime
// maps it executable so that perf records its path) as images/jit-PID.dump, and
// /tmp/perf-PID.map of every process the sideband names as images/perf-PID.map.
// Shared by every backend.

#include "common/trace_dir.h"
#include "common/trace_meta.h"

namespace ptd {

// Reads meta->sideband and meta->pids; adds a note per file copied or not copied.
void ArchiveJitFiles(const TraceDirWriter& dir, TraceMeta* meta);

}  // namespace ptd
