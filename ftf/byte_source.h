#pragma once
// Where the reader's bytes come from: a file (plain or gzip, told apart by content) or
// memory (tests, fuzzing).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ptd::ftf {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to out.size() bytes; 0 means end of input.
  virtual absl::StatusOr<size_t> Read(absl::Span<uint8_t> out) = 0;
};

// gzip input is decompressed; anything else is read as is.
absl::StatusOr<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path);

// Reads `bytes`, which must outlive the source.
std::unique_ptr<ByteSource> MakeMemorySource(absl::Span<const uint8_t> bytes);

}  // namespace ptd::ftf
