#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace ptd {

absl::Status ErrnoError(absl::string_view what, absl::string_view path, int errno_value) {
  std::string msg = absl::StrCat(path, ": ", what, ": ", std::strerror(errno_value));
  switch (errno_value) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return absl::ResourceExhaustedError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    default:
      return absl::InternalError(msg);
  }
}

namespace {

template <typename Container>
absl::StatusOr<Container> ReadWhole(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  Container out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return ErrnoError("read failed", path, e);
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return out;
}

absl::Status WriteAll(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write failed", path, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  return ReadWhole<std::string>(path);
}

absl::StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path) {
  return ReadWhole<std::vector<uint8_t>>(path);
}

absl::Status WriteFileAtomic(const std::string& path, absl::Span<const uint8_t> data) {
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp, errno);
  absl::Status st = WriteAll(fd, data.data(), data.size(), tmp);
  if (st.ok() && ::fsync(fd) != 0) st = ErrnoError("fsync failed", tmp, errno);
  if (::close(fd) != 0 && st.ok()) st = ErrnoError("close failed", tmp, errno);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoError("cannot rename into place", path, errno);
  }
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

absl::Status WriteFileAtomic(const std::string& path, std::string_view data) {
  return WriteFileAtomic(
      path, absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

absl::string_view Basename(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

std::string Dirname(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? std::string(".") : std::string(path.substr(0, slash));
}

bool PathExists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return ErrnoError("cannot create directory", path, ec.value());
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return ErrnoError("cannot remove", path, ec.value());
  return absl::OkStatus();
}

}  // namespace ptd
