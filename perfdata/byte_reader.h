#pragma once
// Bounds-checked little-endian reads from a byte span. Every failure names the source
// (file name), the absolute byte offset and what was being read, so a bad perf.data
// error says where to look.

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ptd::perfdata {

class ByteReader {
 public:
  // `base_offset` is the offset of data[0] in the file, for messages.
  ByteReader(absl::Span<const uint8_t> data, std::string source, uint64_t base_offset = 0)
      : data_(data), source_(std::move(source)), base_offset_(base_offset) {}

  uint64_t size() const { return data_.size(); }
  const std::string& source() const { return source_; }
  uint64_t FileOffset(uint64_t pos) const { return base_offset_ + pos; }

  bool Has(uint64_t pos, uint64_t len) const {
    return pos <= data_.size() && len <= data_.size() - pos;
  }

  template <typename T>
  absl::StatusOr<T> Read(uint64_t pos, absl::string_view what) const {
    static_assert(std::is_trivially_copyable_v<T>);
    if (!Has(pos, sizeof(T))) return OutOfBounds(pos, sizeof(T), what);
    T value;
    std::memcpy(&value, data_.data() + pos, sizeof(T));
    return value;
  }

  absl::StatusOr<absl::Span<const uint8_t>> Bytes(uint64_t pos, uint64_t len,
                                                  absl::string_view what) const {
    if (!Has(pos, len)) return OutOfBounds(pos, len, what);
    return data_.subspan(pos, len);
  }

  // A view of [pos, pos+len) keeping absolute offsets for messages.
  absl::StatusOr<ByteReader> Sub(uint64_t pos, uint64_t len, absl::string_view what) const {
    if (!Has(pos, len)) return OutOfBounds(pos, len, what);
    return ByteReader(data_.subspan(pos, len), source_, base_offset_ + pos);
  }

  // A NUL-padded string in a fixed-size field (stops at the first NUL).
  std::string CString(uint64_t pos, uint64_t max_len) const {
    if (pos >= data_.size()) return {};
    uint64_t len = 0;
    const uint64_t limit = std::min<uint64_t>(max_len, data_.size() - pos);
    while (len < limit && data_[pos + len] != 0) ++len;
    return std::string(reinterpret_cast<const char*>(data_.data() + pos), len);
  }

  absl::Status Error(uint64_t pos, absl::string_view what) const {
    return absl::DataLossError(
        absl::StrFormat("%s: offset 0x%x: %s", source_, FileOffset(pos), what));
  }

 private:
  absl::Status OutOfBounds(uint64_t pos, uint64_t len, absl::string_view what) const {
    return absl::DataLossError(absl::StrFormat(
        "%s: offset 0x%x: %s needs %u bytes but only %d remain", source_, FileOffset(pos), what,
        len, pos <= data_.size() ? static_cast<int64_t>(data_.size() - pos) : 0));
  }

  absl::Span<const uint8_t> data_;
  std::string source_;
  uint64_t base_offset_ = 0;
};

}  // namespace ptd::perfdata
