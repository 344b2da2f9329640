#include "ftf/byte_sink.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <algorithm>
#include <climits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ptd::ftf {
namespace {

class FdSink : public ByteSink {
 public:
  FdSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~FdSink() override {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status Write(absl::Span<const uint8_t> bytes) override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": write after close"));
    while (!bytes.empty()) {
      ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("write", path_, errno);
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoError("close", path_, errno);
    return absl::OkStatus();
  }

 private:
  int fd_;
  std::string path_;
};

class GzipSink : public ByteSink {
 public:
  GzipSink(gzFile file, std::string path) : file_(file), path_(std::move(path)) {}
  ~GzipSink() override {
    if (file_ != nullptr) gzclose(file_);
  }

  absl::Status Write(absl::Span<const uint8_t> bytes) override {
    if (file_ == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(path_, ": write after close"));
    }
    while (!bytes.empty()) {
      // gzwrite takes an unsigned length and returns an int.
      unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes.size(), INT_MAX / 2));
      int n = gzwrite(file_, bytes.data(), chunk);
      if (n <= 0) return GzError("gzwrite");
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (file_ == nullptr) return absl::OkStatus();
    gzFile file = file_;
    file_ = nullptr;
    int rc = gzclose(file);
    if (rc != Z_OK) {
      if (rc == Z_ERRNO) return ErrnoError("gzclose", path_, errno);
      return absl::DataLossError(absl::StrCat(path_, ": gzclose failed (zlib error ", rc, ")"));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status GzError(absl::string_view what) {
    int zerr = 0;
    const char* message = gzerror(file_, &zerr);
    if (zerr == Z_ERRNO) return ErrnoError(what, path_, errno);
    return absl::DataLossError(absl::StrCat(path_, ": ", what, ": ", message ? message : "?"));
  }

  gzFile file_;
  std::string path_;
};

class StringSink : public ByteSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  absl::Status Write(absl::Span<const uint8_t> bytes) override {
    out_->append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return absl::OkStatus();
  }
  absl::Status Close() override { return absl::OkStatus(); }

 private:
  std::string* out_;
};

// Counts and discards (sizing a file before writing it).
class CountingSink : public ByteSink {
 public:
  explicit CountingSink(uint64_t* count) : count_(count) {}
  absl::Status Write(absl::Span<const uint8_t> bytes) override {
    *count_ += bytes.size();
    return absl::OkStatus();
  }
  absl::Status Close() override { return absl::OkStatus(); }

 private:
  uint64_t* count_;
};

}  // namespace

std::unique_ptr<ByteSink> MakeCountingSink(uint64_t* count) { return std::unique_ptr<ByteSink>(new CountingSink(count)); }

absl::StatusOr<std::unique_ptr<ByteSink>> OpenFileSink(const std::string& path, int gzip_level) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("open", path, errno);
  if (!absl::EndsWith(path, ".gz")) return std::unique_ptr<ByteSink>(new FdSink(fd, path));
  int level = gzip_level < 1 ? 1 : (gzip_level > 9 ? 9 : gzip_level);
  std::string mode = absl::StrCat("wb", level);
  gzFile file = gzdopen(fd, mode.c_str());
  if (file == nullptr) {
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(path, ": gzdopen failed"));
  }
  // Larger than zlib's 8 KiB default: fewer, bigger write() calls.
  gzbuffer(file, 256 * 1024);
  return std::unique_ptr<ByteSink>(new GzipSink(file, path));
}

std::unique_ptr<ByteSink> MakeStringSink(std::string* out) {
  return std::unique_ptr<ByteSink>(new StringSink(out));
}

}  // namespace ptd::ftf
