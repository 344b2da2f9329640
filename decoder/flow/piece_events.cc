#include "decoder/flow/piece_events.h"

#include <algorithm>
#include <cstring>

namespace ptd::decoder {

void PieceEvents::Grow(size_t words) {
  const size_t capacity = std::max(words, capacity_ * 2);
  std::unique_ptr<uint64_t[]> grown = std::make_unique_for_overwrite<uint64_t[]>(capacity);
  if (size_ != 0) std::memcpy(grown.get(), words_.get(), size_ * sizeof(uint64_t));
  words_ = std::move(grown);
  capacity_ = capacity;
}

size_t PieceEvents::PutRare(uint64_t head, const FlowEvent& event, uint64_t* w) {
  size_t n = 5;
  if (head & kFallthrough) w[n++] = event.fallthrough;
  if (head & kCycles) w[n++] = event.cycles;
  if (head & kOffset) w[n++] = event.offset;
  if (head & kEnableTime) w[n++] = event.enable_time;
  if (head & kMessage) w[n++] = reinterpret_cast<uintptr_t>(event.message);
  if (head & kImageTsc) {
    w[n++] = event.image_tsc;
    image_tsc_ = event.image_tsc;
  }
  return n;
}

void PieceEvents::Reader::GetRare(uint64_t head, FlowEvent* event) {
  if (head & kFallthrough) event->fallthrough = *at_++;
  if (head & kCycles) event->cycles = *at_++;
  if (head & kOffset) event->offset = *at_++;
  if (head & kEnableTime) event->enable_time = *at_++;
  if (head & kMessage) event->message = reinterpret_cast<const char*>(*at_++);
  if (head & kImageTsc) {
    image_tsc_ = *at_++;
    event->image_tsc = image_tsc_;
  }
}

}  // namespace ptd::decoder
