#pragma once
// Where generated PT bytes go: a file written linearly (full-trace mode), an overwrite
// ring (snapshot mode), or memory (tests). The generator hands over whole packets.

#include <cstddef>
#include <cstdint>

namespace ptd {

class PacketSink {
 public:
  virtual ~PacketSink() = default;
  virtual void Write(const uint8_t* data, size_t size) = 0;
};

}  // namespace ptd
