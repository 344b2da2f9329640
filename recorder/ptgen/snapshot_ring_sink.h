#pragma once
// Snapshot mode: the emulated equivalent of an overwrite-mode AUX ring. Keeps the newest
// `capacity` bytes; older bytes are overwritten, so the kept data may begin mid-packet
// exactly as a hardware snapshot does (decoders sync at the first PSB).

#include <cstdint>
#include <vector>

#include "recorder/ptgen/packet_sink.h"

namespace ptd {

class SnapshotRingSink : public PacketSink {
 public:
  explicit SnapshotRingSink(uint64_t capacity);

  void Write(const uint8_t* data, size_t size) override;
  // The newest min(head, capacity) bytes in stream order.
  std::vector<uint8_t> Snapshot() const;
  // The bytes from stream position `from` to head(), or the newest `capacity` of them
  // when older ones were overwritten.
  std::vector<uint8_t> Since(uint64_t from) const;
  // Total bytes ever written: the aux_head of the stream.
  uint64_t head() const { return head_; }
  bool wrapped() const { return head_ > ring_.size(); }

 private:
  std::vector<uint8_t> ring_;
  uint64_t head_ = 0;
};

}  // namespace ptd
