#pragma once
// Debug files fetched by build-id from the debuginfod servers named in DEBUGINFOD_URLS,
// through elfutils' libdebuginfod client (its cache, $DEBUGINFOD_CACHE_PATH or
// ~/.cache/debuginfod_client, and its timeouts, $DEBUGINFOD_TIMEOUT). For code files with
// no debug info on this machine. A server that cannot be reached or fails is tried no
// more: one warning, and names come from the files' own symbol tables.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

struct debuginfod_client;

namespace ptd {
class ProgressBar;
}

namespace ptd::image {

class DebuginfodFetcher {
 public:
  // nullptr when DEBUGINFOD_URLS is unset or empty (debuginfod is off). `progress`: a
  // progress line on stderr while a file downloads.
  static std::unique_ptr<DebuginfodFetcher> FromEnvironment(bool progress);
  ~DebuginfodFetcher();
  DebuginfodFetcher(const DebuginfodFetcher&) = delete;
  DebuginfodFetcher& operator=(const DebuginfodFetcher&) = delete;

  // The local path (in the client's cache) of the debug file with `build_id` (hex), for
  // the code file `file` (messages). NotFound: no server has it. Unavailable: a server
  // failed, now or before (warned once).
  absl::StatusOr<std::string> Fetch(const std::string& build_id, const std::string& file);
  // What a server sent for `file` is no debug file: warned once.
  void RejectFetched(const std::string& file, const std::string& path, const std::string& why);

  // "debuginfod: debug info of N files (SIZE) from URLS", or "" when nothing was fetched.
  std::string Summary() const;
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  DebuginfodFetcher(debuginfod_client* client, std::string urls, bool progress);
  static int OnProgress(debuginfod_client* client, long done, long total);
  void Warn(std::string warning);

  debuginfod_client* client_;
  std::string urls_;
  bool progress_enabled_;
  std::unique_ptr<ProgressBar> progress_;
  std::string downloading_;  // the file whose debug info is downloading (progress label)
  bool failed_ = false;
  size_t fetched_files_ = 0;
  uint64_t fetched_bytes_ = 0;
  std::vector<std::string> warnings_;
};

}  // namespace ptd::image
