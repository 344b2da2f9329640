#pragma once
// /proc/PID/maps as data. Used to synthesize MMAP2 records at attach time and to find
// the vDSO and anonymous executable (JIT) memory.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ptd {

struct ProcMapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t prot = 0;   // PROT_READ | PROT_WRITE | PROT_EXEC
  uint32_t flags = 0;  // MAP_PRIVATE or MAP_SHARED
  uint64_t pgoff = 0;
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  std::string path;  // file path, "[vdso]", "[stack]" ..., or empty for anonymous memory

  bool executable() const;
  bool anonymous() const { return path.empty(); }
  bool special() const { return !path.empty() && path.front() == '['; }
};

// Parses the text of a maps file; `source` names it in errors (with the line number).
absl::StatusOr<std::vector<ProcMapping>> ParseProcMaps(absl::string_view text,
                                                       const std::string& source);
// Reads and parses /proc/PID/maps.
absl::StatusOr<std::vector<ProcMapping>> ReadProcMaps(int pid);

}  // namespace ptd
