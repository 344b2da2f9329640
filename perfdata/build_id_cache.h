#pragma once
// perf's build-id cache (~/.debug or `perf --buildid-dir`): where perf keeps a copy of
// every binary it saw, keyed by build-id. Layout (tools/perf/util/build-id.c):
//   <dir>/<path of the binary>/<build-id>/elf        (kernel: kallsyms, vDSO: vdso)
//   <dir>/.build-id/<first 2 hex>/<other 38 hex> -> ../../<path>/<build-id>
// We read it to find binaries for imported traces and write it for `export perf`.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptd::perfdata {

class BuildIdCache {
 public:
  explicit BuildIdCache(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}

  // The directories perf itself would search by default: $HOME/.debug.
  static std::vector<std::string> DefaultDirs();

  // The cached file for `build_id` (hex) of the binary perf knew as `name`, or "".
  std::string Find(const std::string& build_id, const std::string& name) const;

  // Copies `source` into `dir` as perf does for `name` ("[vdso]" is stored as "vdso"),
  // with the .build-id link. Returns the path of the cached file.
  static absl::StatusOr<std::string> Add(const std::string& dir, const std::string& build_id,
                                         const std::string& name, const std::string& source);

 private:
  std::vector<std::string> dirs_;
};

}  // namespace ptd::perfdata
