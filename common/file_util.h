#pragma once
// Whole-file I/O with errors that name the file and the OS reason.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ptd {

// Error for a failed system call on `path`, carrying strerror(errno_value).
absl::Status ErrnoError(absl::string_view what, absl::string_view path, int errno_value);

absl::StatusOr<std::string> ReadFileToString(const std::string& path);
absl::StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path);

// Writes `data` to `path` via a temporary file in the same directory, fsync and rename,
// so readers see the old file or the whole new one, never a torn one.
absl::Status WriteFileAtomic(const std::string& path, absl::Span<const uint8_t> data);
absl::Status WriteFileAtomic(const std::string& path, std::string_view data);

// The last component of `path`: all of it when it has no '/'.
absl::string_view Basename(absl::string_view path);
// Everything before the last '/' of `path`; "." when it has none.
std::string Dirname(absl::string_view path);

bool PathExists(const std::string& path);
// Size in bytes of the file at `path` (symlinks followed); -1 when it cannot be stat'ed.
int64_t FileSize(const std::string& path);
bool IsDirectory(const std::string& path);
absl::Status MakeDirs(const std::string& path);
// Removes a file or a whole directory tree. Missing paths are not an error.
absl::Status RemoveTree(const std::string& path);

}  // namespace ptd
