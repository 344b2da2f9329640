#pragma once
// Self-contained traces: at the end of a recording, every file the target mapped code
// from is copied into the trace directory by build-id (images/by-build-id/xx/rest), so a
// binary rebuilt, replaced or absent later (another machine, a container) still decodes.
// One copy per build-id is kept in a shared cache and hard-linked into each trace, like
// perf's ~/.debug. Shared by every backend (hardware, ptrace emulator, Valgrind).

#include <cstdint>
#include <string>

#include "common/trace_dir.h"
#include "common/trace_meta.h"

namespace ptd {

struct ArchiveOptions {
  bool enabled = true;    // false (--no-archive): only the build-ids are noted
  std::string cache_dir;  // "": DefaultArchiveCacheDir()
};

// $PTD_CACHE_DIR, else $XDG_CACHE_HOME/ptrace-direct, else $HOME/.cache/ptrace-direct;
// "" when none of them is set.
std::string DefaultArchiveCacheDir();

struct ArchiveStats {
  uint64_t files = 0;      // archived files
  uint64_t bytes = 0;      // their total size
  uint64_t linked = 0;     // hard-linked from the cache (no bytes copied)
  double seconds = 0;
};

// For every file an MMAP/MMAP2 record of `meta->sideband` names: notes its build-id in
// `meta->build_ids` and, when enabled, archives it (meta->archive, meta->archived). The
// bytes are read as the process saw them while it is alive (/proc/PID/map_files, then
// /proc/PID/root/PATH), else from PATH. Problems become notes; a recording never fails
// because of its archive.
ArchiveStats ArchiveMappedFiles(const TraceDirWriter& dir, const ArchiveOptions& options, TraceMeta* meta);

}  // namespace ptd
