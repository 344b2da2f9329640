#pragma once
// The GNU build-id note of an ELF file, which perf uses to key its build-id cache.

#include <string>

#include "absl/status/statusor.h"

namespace ptd::perfdata {

// Lowercase hex of NT_GNU_BUILD_ID, or NotFound when the file has none.
absl::StatusOr<std::string> ReadElfBuildId(const std::string& path);

}  // namespace ptd::perfdata
