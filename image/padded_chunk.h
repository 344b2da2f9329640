#pragma once
// A chunk of a trace file as libipt needs it: the file's bytes [offset, offset + size)
// followed by zero bytes (libipt 2.0.5's PSB search reads past the end of its buffer).
// The chunk is not copied: its whole pages are the file's pages mapped in place, and only
// its last partial page is copied, into anonymous memory whose rest is the zeros. So
// decoding a multi-gigabyte chunk needs no multi-gigabyte buffer.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ptd::image {

class PaddedChunk {
 public:
  static absl::StatusOr<std::unique_ptr<PaddedChunk>> Map(const std::string& path, uint64_t offset, size_t size,
                                                          size_t padding);
  ~PaddedChunk();
  PaddedChunk(const PaddedChunk&) = delete;
  PaddedChunk& operator=(const PaddedChunk&) = delete;

  // `size()` bytes of the file, then at least `padding` zero bytes.
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  PaddedChunk(void* base, size_t length, const uint8_t* data, size_t size)
      : base_(base), length_(length), data_(data), size_(size) {}

  void* base_;
  size_t length_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace ptd::image
