#pragma once
// Creating a trace directory so that it appears complete or not at all: everything is
// written under a hidden sibling "<dir>.partial-<pid>" and renamed into place by Commit().

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/trace_meta.h"

namespace ptd {

inline constexpr char kAuxSubdir[] = "aux";
inline constexpr char kSidebandSubdir[] = "sideband";
inline constexpr char kImagesSubdir[] = "images";

class TraceDirWriter {
 public:
  // Refuses an existing `final_dir` unless `force` (then it is replaced at Commit()).
  static absl::StatusOr<TraceDirWriter> Create(const std::string& final_dir, bool force);

  TraceDirWriter(TraceDirWriter&& other) noexcept;
  TraceDirWriter& operator=(TraceDirWriter&& other) noexcept;
  TraceDirWriter(const TraceDirWriter&) = delete;
  TraceDirWriter& operator=(const TraceDirWriter&) = delete;
  // Removes the staging directory unless Commit() succeeded.
  ~TraceDirWriter();

  // Where files go while recording; pass relative names through FilePath().
  const std::string& staging_dir() const { return staging_dir_; }
  const std::string& final_dir() const { return final_dir_; }
  std::string FilePath(const std::string& relative) const;

  // Writes meta.json and moves the directory into place.
  absl::Status Commit(const TraceMeta& meta);
  // Keeps nothing.
  void Abort();

 private:
  TraceDirWriter(std::string final_dir, std::string staging_dir, bool force);

  std::string final_dir_;
  std::string staging_dir_;
  bool force_ = false;
  bool done_ = false;
};

// Resolves a path stored in meta.json: relative ones are inside `trace_dir`.
std::string ResolveTracePath(const std::string& trace_dir, const std::string& path);

}  // namespace ptd
