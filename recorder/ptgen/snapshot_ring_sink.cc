#include "recorder/ptgen/snapshot_ring_sink.h"

#include <algorithm>
#include <cstring>

namespace ptd {

SnapshotRingSink::SnapshotRingSink(uint64_t capacity) : ring_(std::max<uint64_t>(capacity, 1)) {}

void SnapshotRingSink::Write(const uint8_t* data, size_t size) {
  const uint64_t cap = ring_.size();
  if (size >= cap) {  // only the last `cap` bytes survive
    data += size - cap;
    head_ += size - cap;
    size = cap;
  }
  while (size > 0) {
    const uint64_t pos = head_ % cap;
    const size_t n = std::min<uint64_t>(size, cap - pos);
    std::memcpy(ring_.data() + pos, data, n);
    data += n;
    size -= n;
    head_ += n;
  }
}

std::vector<uint8_t> SnapshotRingSink::Snapshot() const {
  const uint64_t cap = ring_.size();
  if (head_ <= cap) return std::vector<uint8_t>(ring_.begin(), ring_.begin() + head_);
  std::vector<uint8_t> out(cap);
  const uint64_t pos = head_ % cap;
  std::memcpy(out.data(), ring_.data() + pos, cap - pos);
  std::memcpy(out.data() + (cap - pos), ring_.data(), pos);
  return out;
}

std::vector<uint8_t> SnapshotRingSink::Since(uint64_t from) const {
  const uint64_t cap = ring_.size();
  const uint64_t start = std::max<uint64_t>(from, head_ > cap ? head_ - cap : 0);
  std::vector<uint8_t> out(head_ > start ? head_ - start : 0);
  for (uint64_t pos = start, copied = 0; copied < out.size();) {
    const uint64_t at = pos % cap;
    const uint64_t n = std::min<uint64_t>(out.size() - copied, cap - at);
    std::memcpy(out.data() + copied, ring_.data() + at, n);
    copied += n;
    pos += n;
  }
  return out;
}

}  // namespace ptd
