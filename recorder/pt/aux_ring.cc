#include "recorder/pt/aux_ring.h"

#include <algorithm>

namespace ptd::pt {

AuxRing::AuxRing(perf_event_mmap_page* header, const uint8_t* aux, size_t aux_size,
                 bool overwrite, AuxHeadKind head_kind)
    : header_(header), aux_(aux), size_(aux_size), overwrite_(overwrite),
      head_kind_(head_kind) {}

uint64_t AuxRing::head() const {
  // Pairs with the kernel's release of aux_head: the AUX bytes below it are visible.
  return __atomic_load_n(&header_->aux_head, __ATOMIC_ACQUIRE);
}

void AuxRing::CopyOut(uint64_t pos, uint64_t size, std::string* out) const {
  const uint64_t start = pos % size_;
  const uint64_t first = std::min<uint64_t>(size, size_ - start);
  out->append(reinterpret_cast<const char*>(aux_) + start, first);
  if (first < size) out->append(reinterpret_cast<const char*>(aux_), size - first);
}

AuxCopy AuxRing::Drain(std::string* out) {
  AuxCopy copy;
  const uint64_t head = this->head();
  const uint64_t tail = __atomic_load_n(&header_->aux_tail, __ATOMIC_RELAXED);
  copy.aux_offset = tail;
  if (head == tail) return copy;
  // The kernel never writes more than size_ past aux_tail in linear mode; a larger gap
  // would be a corrupt header, and we clamp rather than read outside the mapping.
  uint64_t size = head - tail;
  if (size > size_) {
    copy.lost_before = true;
    copy.aux_offset = head - size_;
    size = size_;
  }
  CopyOut(copy.aux_offset, size, out);
  copy.size = size;
  // Release: our reads of the bytes happen before the kernel may overwrite them.
  __atomic_store_n(&header_->aux_tail, head, __ATOMIC_RELEASE);
  return copy;
}

AuxCopy AuxRing::CopyNewest(std::string* out) {
  AuxCopy copy;
  const uint64_t head = this->head();
  if (head_kind_ == AuxHeadKind::kBufferOffset) {
    // Oldest byte is the one the hardware writes next: [head % size, end) then [0, head).
    copy.aux_offset = stream_pos_;
    copy.size = size_;
    copy.lost_before = copied_before_;  // cannot know: assume the ring moved on
    CopyOut(head % size_, size_, out);
    stream_pos_ += size_;
    copied_before_ = true;
    return copy;
  }
  const uint64_t oldest_kept = head > size_ ? head - size_ : 0;
  const uint64_t start = std::max(last_head_, oldest_kept);
  copy.aux_offset = start;
  copy.size = head - start;
  copy.lost_before = copied_before_ && start > last_head_;
  CopyOut(start, copy.size, out);
  last_head_ = head;
  copied_before_ = true;
  return copy;
}

}  // namespace ptd::pt
