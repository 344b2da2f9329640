#pragma once
// Full-trace mode: PT bytes appended to a stream file (aux/tid<N>.pt or aux/cpu<N>.pt).

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "recorder/ptgen/packet_sink.h"

namespace ptd {

class FileSink : public PacketSink {
 public:
  explicit FileSink(std::string path);
  ~FileSink() override;
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  void Write(const uint8_t* data, size_t size) override;
  // Closes the file; the first open or write error, if any.
  absl::Status Close();
  uint64_t bytes() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int error_ = 0;  // errno of the first failure
  uint64_t bytes_ = 0;
};

}  // namespace ptd
