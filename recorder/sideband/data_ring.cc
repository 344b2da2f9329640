#include "recorder/sideband/data_ring.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace ptd {
namespace {

// PERF_RECORD_LOST / PERF_RECORD_LOST_SAMPLES bodies start with these fields.
struct LostBody {
  uint64_t id;
  uint64_t lost;
};
struct LostSamplesBody {
  uint64_t lost;
};

}  // namespace

DataRing::DataRing(perf_event_mmap_page* header, uint8_t* data, size_t data_size)
    : header_(header), data_(data), data_size_(data_size), mask_(data_size - 1) {}

bool DataRing::HasData() const {
  uint64_t head = __atomic_load_n(&header_->data_head, __ATOMIC_ACQUIRE);
  return head != __atomic_load_n(&header_->data_tail, __ATOMIC_RELAXED);
}

void DataRing::CopyOut(uint64_t pos, size_t size, uint8_t* dst) const {
  size_t start = static_cast<size_t>(pos & mask_);
  size_t first = std::min(size, data_size_ - start);
  std::memcpy(dst, data_ + start, first);
  if (first < size) std::memcpy(dst + first, data_, size - first);
}

absl::Status DataRing::Drain(std::string* out_append, DataRingStats* stats) {
  // The acquire load pairs with the kernel's release of data_head: the record bytes
  // below head are visible once head is.
  const uint64_t head = __atomic_load_n(&header_->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = __atomic_load_n(&header_->data_tail, __ATOMIC_RELAXED);
  if (head == tail) return absl::OkStatus();
  stats->drains++;
  absl::Status status = absl::OkStatus();
  if (head - tail > data_size_) {
    status = absl::DataLossError(absl::StrFormat(
        "DATA ring: data_head 0x%x is %d bytes ahead of data_tail 0x%x, more than the "
        "%d-byte ring; dropping the unread data",
        head, head - tail, tail, data_size_));
    tail = head;
  }
  // One reserve per drain, not per record.
  out_append->reserve(out_append->size() + static_cast<size_t>(head - tail));
  // Positions are compared by difference, never with <, so they may wrap around 2^64.
  while (tail != head) {
    perf_event_header h;
    if (head - tail < sizeof(h)) {
      status = absl::DataLossError(absl::StrFormat(
          "DATA ring offset 0x%x (position 0x%x): %d bytes left before data_head, less than a "
          "record header",
          tail & mask_, tail, head - tail));
      break;
    }
    CopyOut(tail, sizeof(h), reinterpret_cast<uint8_t*>(&h));
    if (h.size < sizeof(h) || h.size % 8 != 0 || h.size > head - tail) {
      status = absl::DataLossError(absl::StrFormat(
          "DATA ring offset 0x%x (position 0x%x): record type %d has invalid size %d "
          "(%d bytes before data_head)",
          tail & mask_, tail, h.type, h.size, head - tail));
      break;
    }
    size_t at = out_append->size();
    out_append->resize(at + h.size);
    uint8_t* dst = reinterpret_cast<uint8_t*>(out_append->data()) + at;
    CopyOut(tail, h.size, dst);
    if ((tail & mask_) + h.size > data_size_) stats->wrapped_records++;
    if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + sizeof(LostBody)) {
      LostBody body;
      std::memcpy(&body, dst + sizeof(h), sizeof(body));
      stats->lost_records += body.lost;
      stats->lost_events++;
    } else if (h.type == PERF_RECORD_LOST_SAMPLES &&
               h.size >= sizeof(h) + sizeof(LostSamplesBody)) {
      LostSamplesBody body;
      std::memcpy(&body, dst + sizeof(h), sizeof(body));
      stats->lost_samples += body.lost;
    }
    stats->records++;
    stats->bytes += h.size;
    tail += h.size;
  }
  // Release pairs with the kernel's read of data_tail: our copies are done before it may
  // overwrite the space. After corruption the rest is skipped so recording can go on.
  __atomic_store_n(&header_->data_tail, status.ok() ? tail : head, __ATOMIC_RELEASE);
  return status;
}

}  // namespace ptd
