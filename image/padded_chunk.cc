#include "image/padded_chunk.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_format.h"
#include "common/file_util.h"

namespace ptd::image {

absl::StatusOr<std::unique_ptr<PaddedChunk>> PaddedChunk::Map(const std::string& path, uint64_t offset, size_t size,
                                                              size_t padding) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t first_page = offset & ~(page - 1);
  const uint64_t end = offset + size;
  const uint64_t tail_page = end & ~(page - 1);  // file pages before it are mapped in place
  const size_t mapped = static_cast<size_t>(tail_page - first_page);
  const size_t tail = static_cast<size_t>(end - tail_page);
  const size_t length = mapped + static_cast<size_t>((tail + padding + page - 1) & ~(page - 1));

  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  // Reserve the whole range as zeroed anonymous memory, then put the file's pages over
  // its start and copy the partial last page into what follows them.
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    return ErrnoError("mmap (anonymous) for", path, err);
  }
  auto fail = [&](const char* what) {
    int err = errno;
    ::munmap(base, length);
    ::close(fd);
    return ErrnoError(what, path, err);
  };
  uint8_t* bytes = static_cast<uint8_t*>(base);
  // Where reading starts: after the pages mapped in place, or (a file that cannot be
  // mapped) at the first page, copying the whole chunk.
  size_t read_from = mapped;
  if (mapped > 0 && ::mmap(bytes, mapped, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, static_cast<off_t>(first_page)) ==
                        MAP_FAILED) {
    read_from = 0;
  }
  for (size_t done = 0; done < mapped + tail - read_from;) {
    ssize_t n = ::pread(fd, bytes + read_from + done, mapped + tail - read_from - done,
                        static_cast<off_t>(first_page + read_from + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("read");
    if (n == 0) {
      ::munmap(base, length);
      ::close(fd);
      return absl::OutOfRangeError(
          absl::StrFormat("%s: chunk [0x%x, +0x%x) reaches past the end of the file", path, offset, size));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return std::unique_ptr<PaddedChunk>(
      new PaddedChunk(base, length, bytes + (offset - first_page), size));
}

PaddedChunk::~PaddedChunk() { ::munmap(base_, length_); }

}  // namespace ptd::image
