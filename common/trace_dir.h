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
inline constexpr char kKernelSubdir[] = "kernel";  // kallsyms, modules, kernel text (record --kernel)

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

  // Writes meta.json and moves the directory into place. When that fails the staging
  // directory is kept (never lose what was recorded) and the error names it.
  absl::Status Commit(const TraceMeta& meta);
  // For a recording that stopped on `error` (disk full ...): marks `meta` partial with
  // the reason, cuts chunks down to the bytes actually on disk (a failed write leaves
  // less than was generated) and commits, so what was written decodes.
  absl::Status CommitPartial(TraceMeta meta, const absl::Status& error);
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

// Makes every chunk of `meta` lie within its stream file as it is on disk under
// `trace_dir`: a chunk reaching past the end is cut (and marked truncated), one that
// starts past it is dropped. Returns how many chunks changed.
size_t ClampChunksToFiles(const std::string& trace_dir, TraceMeta* meta);

}  // namespace ptd
