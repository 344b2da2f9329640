#include "common/trace_dir.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ptd {

absl::StatusOr<TraceDirWriter> TraceDirWriter::Create(const std::string& final_dir, bool force) {
  std::string dir = final_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) return absl::InvalidArgumentError("output directory name is empty");
  if (PathExists(dir) && !force) {
    return absl::AlreadyExistsError(
        absl::StrCat(dir, ": already exists; choose another name or pass --force to replace it"));
  }
  std::string staging = absl::StrCat(dir, ".partial-", ::getpid());
  if (absl::Status st = RemoveTree(staging); !st.ok()) return st;
  for (const char* sub : {kAuxSubdir, kSidebandSubdir, kImagesSubdir}) {
    if (absl::Status st = MakeDirs(absl::StrCat(staging, "/", sub)); !st.ok()) return st;
  }
  return TraceDirWriter(dir, staging, force);
}

TraceDirWriter::TraceDirWriter(std::string final_dir, std::string staging_dir, bool force)
    : final_dir_(std::move(final_dir)), staging_dir_(std::move(staging_dir)), force_(force) {}

TraceDirWriter::TraceDirWriter(TraceDirWriter&& other) noexcept
    : final_dir_(std::move(other.final_dir_)),
      staging_dir_(std::move(other.staging_dir_)),
      force_(other.force_),
      done_(other.done_) {
  other.done_ = true;
}

TraceDirWriter& TraceDirWriter::operator=(TraceDirWriter&& other) noexcept {
  if (this != &other) {
    Abort();
    final_dir_ = std::move(other.final_dir_);
    staging_dir_ = std::move(other.staging_dir_);
    force_ = other.force_;
    done_ = other.done_;
    other.done_ = true;
  }
  return *this;
}

TraceDirWriter::~TraceDirWriter() { Abort(); }

std::string TraceDirWriter::FilePath(const std::string& relative) const {
  return absl::StrCat(staging_dir_, "/", relative);
}

absl::Status TraceDirWriter::Commit(const TraceMeta& meta) {
  if (done_) return absl::FailedPreconditionError("trace directory already committed or aborted");
  if (absl::Status st = WriteTraceMeta(staging_dir_, meta); !st.ok()) return st;
  if (PathExists(final_dir_)) {
    if (!force_) {
      return absl::AlreadyExistsError(absl::StrCat(
          final_dir_, ": appeared while recording; the recording is kept in ", staging_dir_));
    }
    if (absl::Status st = RemoveTree(final_dir_); !st.ok()) return st;
  }
  if (std::rename(staging_dir_.c_str(), final_dir_.c_str()) != 0) {
    return ErrnoError(absl::StrCat("cannot rename ", staging_dir_, " to"), final_dir_, errno);
  }
  done_ = true;
  return absl::OkStatus();
}

void TraceDirWriter::Abort() {
  if (done_) return;
  done_ = true;
  (void)RemoveTree(staging_dir_);
}

std::string ResolveTracePath(const std::string& trace_dir, const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  return absl::StrCat(trace_dir, "/", path);
}

}  // namespace ptd
