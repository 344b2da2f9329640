#pragma once
// A perf.data given where a trace directory is expected (`decode perf.data`): detected
// by its magic, imported into a private temporary trace directory that lives as long as
// this object, so the ordinary pipeline reads it unchanged.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/missing_binaries.h"

namespace ptd::perfdata {

// True when `path` is a regular file that begins with perf's "PERFILE2" magic in either
// byte order (file mode and pipe mode share it; the reader refuses big-endian files
// with its own message).
bool IsPerfDataFile(const std::string& path);

class TemporaryPerfImport {
 public:
  // Reads and imports `perf_data`; binaries are looked up in `buildid_dirs`, then in
  // perf's default cache (~/.debug), then at their recorded paths. The directory is
  // created under $TMPDIR (default /tmp).
  static absl::StatusOr<TemporaryPerfImport> Create(const std::string& perf_data,
                                                    std::vector<std::string> buildid_dirs);

  TemporaryPerfImport(TemporaryPerfImport&& other) noexcept;
  TemporaryPerfImport& operator=(TemporaryPerfImport&& other) noexcept;
  TemporaryPerfImport(const TemporaryPerfImport&) = delete;
  TemporaryPerfImport& operator=(const TemporaryPerfImport&) = delete;
  ~TemporaryPerfImport();  // removes the temporary directory

  const std::string& trace_dir() const { return trace_dir_; }
  // Executable mappings whose binary was found nowhere.
  const MissingBinaries& missing_binaries() const { return missing_binaries_; }
  // The directories searched by build-id, in order.
  const std::vector<std::string>& buildid_dirs() const { return buildid_dirs_; }

 private:
  TemporaryPerfImport() = default;

  std::string perf_data_;
  std::string temp_root_;  // removed by the destructor; "" when moved from
  std::string trace_dir_;
  MissingBinaries missing_binaries_;
  std::vector<std::string> buildid_dirs_;
};

// What the decoding commands (decode, diff, coverage) take: a trace directory as it is,
// or a perf.data imported into a temporary one (removed with this object).
class DecodeInput {
 public:
  static absl::StatusOr<DecodeInput> Open(const std::string& path, std::vector<std::string> buildid_dirs);
  const std::string& trace_dir() const { return import_ ? import_->trace_dir() : path_; }
  // The import of a perf.data input; null for a trace directory.
  const TemporaryPerfImport* perf_import() const { return import_ ? &*import_ : nullptr; }

 private:
  std::string path_;
  std::optional<TemporaryPerfImport> import_;
};

}  // namespace ptd::perfdata
