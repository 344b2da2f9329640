#include "recorder/ptgen/file_sink.h"

#include <cerrno>
#include <utility>

#include "common/file_util.h"

namespace ptd {

FileSink::FileSink(std::string path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) error_ = errno;
}

FileSink::~FileSink() { (void)Close(); }

void FileSink::Write(const uint8_t* data, size_t size) {
  bytes_ += size;
  if (file_ == nullptr || error_ != 0) return;
  if (std::fwrite(data, 1, size, file_) != size) error_ = errno == 0 ? EIO : errno;
}

absl::Status FileSink::Close() {
  if (file_ != nullptr) {
    if (std::fclose(file_) != 0 && error_ == 0) error_ = errno;
    file_ = nullptr;
  }
  if (error_ != 0) return ErrnoError("write PT stream", path_, error_);
  return absl::OkStatus();
}

}  // namespace ptd
