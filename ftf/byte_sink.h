#pragma once
// Where the writer's bytes go: a plain file, a gzip file, memory (tests, fuzzing), or
// nowhere but a byte count.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ptd::ftf {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual absl::Status Write(absl::Span<const uint8_t> bytes) = 0;
  // Flushes and releases the destination; further writes fail.
  virtual absl::Status Close() = 0;
};

// Opens `path` for writing (truncating it): gzip when the name ends in ".gz".
absl::StatusOr<std::unique_ptr<ByteSink>> OpenFileSink(const std::string& path, int gzip_level);

// Appends to *out, which must outlive the sink.
std::unique_ptr<ByteSink> MakeStringSink(std::string* out);

// Adds the size of every write to *count (which must outlive the sink) and keeps nothing.
std::unique_ptr<ByteSink> MakeCountingSink(uint64_t* count);

}  // namespace ptd::ftf
