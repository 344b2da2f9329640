#include "ftf/byte_source.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ptd::ftf {
namespace {

// zlib's gzread reads gzip members and passes other content through unchanged, so one
// source serves .ftf and .ftf.gz whatever the file is called.
class GzFileSource : public ByteSource {
 public:
  GzFileSource(gzFile file, std::string path) : file_(file), path_(std::move(path)) {}
  ~GzFileSource() override { gzclose(file_); }

  absl::StatusOr<size_t> Read(absl::Span<uint8_t> out) override {
    unsigned want = static_cast<unsigned>(std::min<size_t>(out.size(), INT_MAX / 2));
    int n = gzread(file_, out.data(), want);
    if (n < 0) {
      int zerr = 0;
      const char* message = gzerror(file_, &zerr);
      if (zerr == Z_ERRNO) return ErrnoError("read", path_, errno);
      return absl::DataLossError(
          absl::StrCat(path_, ": gzip data at uncompressed offset ", gztell(file_),
                       " is corrupt: ", message ? message : "?"));
    }
    return static_cast<size_t>(n);
  }

 private:
  gzFile file_;
  std::string path_;
};

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}
  absl::StatusOr<size_t> Read(absl::Span<uint8_t> out) override {
    size_t n = std::min(out.size(), bytes_.size());
    if (n > 0) std::memcpy(out.data(), bytes_.data(), n);
    bytes_.remove_prefix(n);
    return n;
  }

 private:
  absl::Span<const uint8_t> bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  gzFile file = gzdopen(fd, "rb");
  if (file == nullptr) {
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(path, ": gzdopen failed"));
  }
  gzbuffer(file, 256 * 1024);
  return std::unique_ptr<ByteSource>(new GzFileSource(file, path));
}

std::unique_ptr<ByteSource> MakeMemorySource(absl::Span<const uint8_t> bytes) {
  return std::unique_ptr<ByteSource>(new MemorySource(bytes));
}

}  // namespace ptd::ftf
