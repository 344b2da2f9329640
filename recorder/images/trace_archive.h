#pragma once
// Self-contained traces: at the end of a recording, every file the target mapped code
// from is copied into the trace directory by build-id (images/by-build-id/xx/rest), so a
// binary rebuilt, replaced or absent later (another machine, a container) still decodes.
// One copy per build-id is kept in a shared cache and hard-linked into each trace, like
// perf's ~/.debug. Shared by every backend (hardware, ptrace emulator, Valgrind).

#include <cstdint>
#include <map>
#include <string>

#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "sideband/perf_record.h"

namespace ptd {

// Mapped files held open from the moment their mapping is seen, for a backend that sees
// each mapping while the process lives (Valgrind): the archive then reads the inode the
// process mapped even when the file is replaced or deleted, or the process has exited,
// before recording ends. One descriptor per path (the first mapping's file).
class MappedFilePins {
 public:
  MappedFilePins() = default;
  MappedFilePins(const MappedFilePins&) = delete;
  MappedFilePins& operator=(const MappedFilePins&) = delete;
  ~MappedFilePins();

  // Opens the file of `map` as process map.pid sees it: /proc/PID/map_files/START-END,
  // else /proc/PID/root/PATH or PATH when its inode is the mapped one. Does nothing for a
  // path already held, a non-file mapping, or one that cannot be opened (the archive
  // then looks for it when recording ends).
  void Pin(const Mmap2Record& map);
  // A path that reads the held file ("/proc/self/fd/N"); "" when `path` is not held.
  std::string Source(const std::string& path) const;
  size_t size() const { return fds_.size(); }

 private:
  std::map<std::string, int> fds_;
};

struct ArchiveOptions {
  bool enabled = true;    // false (--no-archive): only the build-ids are noted
  std::string cache_dir;  // "": DefaultArchiveCacheDir()
  const MappedFilePins* pins = nullptr;  // read first when set
  // The debug file a stripped file with no local debug info lacks, fetched from the
  // servers in DEBUGINFOD_URLS, is archived next to its copy (xx/rest.debug).
  bool debuginfod = false;
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
// bytes are read from `options.pins`, else as the process saw them while it is alive
// (/proc/PID/map_files, then /proc/PID/root/PATH), else from PATH; the last two only when
// the file is still the inode an MMAP2 record names. Problems become notes; a recording
// never fails because of its archive.
ArchiveStats ArchiveMappedFiles(const TraceDirWriter& dir, const ArchiveOptions& options, TraceMeta* meta);

}  // namespace ptd
