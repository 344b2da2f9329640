#pragma once
// Collects generated PT bytes in memory (tests, the walker's small traces).

#include <cstdint>
#include <vector>

#include "recorder/ptgen/packet_sink.h"

namespace ptd {

class MemorySink : public PacketSink {
 public:
  void Write(const uint8_t* data, size_t size) override {
    bytes_.insert(bytes_.end(), data, data + size);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace ptd
