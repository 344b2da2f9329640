#include "common/trace_dir.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

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
  // From here on the staging directory holds a recording: failures keep it.
  auto kept = [this](const absl::Status& error) {
    done_ = true;
    return absl::Status(error.code(), absl::StrCat(error.message(), "; the recorded data is kept in ",
                                                   staging_dir_));
  };
  if (absl::Status st = WriteTraceMeta(staging_dir_, meta); !st.ok()) return kept(st);
  if (PathExists(final_dir_)) {
    if (!force_) {
      return kept(absl::AlreadyExistsError(absl::StrCat(final_dir_, ": appeared while recording")));
    }
    if (absl::Status st = RemoveTree(final_dir_); !st.ok()) return kept(st);
  }
  if (std::rename(staging_dir_.c_str(), final_dir_.c_str()) != 0) {
    return kept(ErrnoError(absl::StrCat("cannot rename ", staging_dir_, " to"), final_dir_, errno));
  }
  done_ = true;
  return absl::OkStatus();
}

absl::Status TraceDirWriter::CommitPartial(TraceMeta meta, const absl::Status& error) {
  meta.partial = true;
  meta.partial_reason = std::string(error.message());
  if (meta.end_reason.empty() || meta.end_reason == "exit") meta.end_reason = "error";
  if (size_t cut = ClampChunksToFiles(staging_dir_, &meta); cut > 0) {
    meta.notes.push_back(absl::StrCat(cut, " PT chunk(s) cut to the bytes that reached the disk"));
  }
  return Commit(meta);
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

size_t ClampChunksToFiles(const std::string& trace_dir, TraceMeta* meta) {
  size_t changed = 0;
  for (PtStream& stream : meta->streams) {
    std::error_code ec;
    const uintmax_t on_disk = std::filesystem::file_size(ResolveTracePath(trace_dir, stream.file), ec);
    const uint64_t file_size = ec ? 0 : static_cast<uint64_t>(on_disk);
    std::vector<PtChunk> kept;
    for (PtChunk chunk : stream.chunks) {
      if (chunk.file_offset >= file_size && chunk.size > 0) {
        ++changed;
        continue;
      }
      if (chunk.size > file_size - chunk.file_offset) {
        chunk.size = file_size - chunk.file_offset;
        chunk.truncated = true;
        ++changed;
      }
      kept.push_back(chunk);
    }
    stream.chunks = std::move(kept);
  }
  return changed;
}

}  // namespace ptd
