#pragma once
// The events a parallel piece records, for the stitcher to replay (parallel_decode.cc).
// They are written by a worker and read back by the stitcher a few pieces later, long
// out of the cache: at 88 bytes a FlowEvent, writing and reading them took ~13 % of a
// `--jobs 2` decode's CPU time on the 60 M walker, stalled on memory. Here an event takes five words, plus
// one for each rare field it has (cycles, offset, enable time, message, a new image
// time, an unusual fallthrough): 40–56 bytes for the events most traces are made of.
// Exact: Read gives back every field as it was recorded.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "decoder/flow/flow_event.h"

namespace ptd::decoder {

class PieceEvents {
 public:
  PieceEvents() = default;
  PieceEvents(PieceEvents&& other) noexcept { *this = std::move(other); }
  PieceEvents& operator=(PieceEvents&& other) noexcept {
    words_ = std::move(other.words_);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    count_ = std::exchange(other.count_, 0);
    image_tsc_ = std::exchange(other.image_tsc_, 0);
    return *this;
  }

  // Appends `event` (hot: one per event of every piece).
  void push_back(const FlowEvent& event) {
    // The common case: five words and no rare field.
    uint64_t head = static_cast<uint64_t>(event.kind) | (event.target_known ? kKnown : 0);
    const uint64_t size = event.fallthrough - event.ip;
    if (event.fallthrough != 0) head |= size < 256 ? kSmallFallthrough | size << kSizeShift : kFallthrough;
    if (event.cycles != 0) head |= kCycles;
    if (event.offset != 0) head |= kOffset;
    if (event.enable_time != 0) head |= kEnableTime;
    if (event.message != nullptr && event.message[0] != '\0') head |= kMessage;
    if (event.image_tsc != image_tsc_) head |= kImageTsc;
    if (capacity_ - size_ < kMaxWords) Grow(size_ + kMaxWords);
    uint64_t* w = words_.get() + size_;
    w[0] = head;
    w[1] = event.ip;
    w[2] = event.target;
    w[3] = event.instructions;
    w[4] = event.time;
    size_t n = 5;
    if (head & kRare) n = PutRare(head, event, w);
    size_ += n;
    ++count_;
  }
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  void clear() {
    size_ = 0;
    count_ = 0;
    image_tsc_ = 0;
  }
  // Room for about `events` events (words are reserved for the common five each).
  void reserve(size_t events) {
    if (events * 5 + kMaxWords > capacity_) Grow(events * 5 + kMaxWords);
  }
  size_t capacity() const { return capacity_; }
  size_t bytes() const { return size_ * sizeof(uint64_t); }

  // A point to come back to (TruncateTo): the events recorded so far.
  struct Mark {
    size_t count = 0;
    size_t words = 0;
    uint64_t image_tsc = 0;
  };
  Mark mark() const { return {count_, size_, image_tsc_}; }
  // Drops the events recorded after `mark` (taken from this list, not cleared since).
  void TruncateTo(const Mark& mark) {
    size_ = mark.words;
    count_ = mark.count;
    image_tsc_ = mark.image_tsc;
  }

  // Reads the events in order.
  class Reader {
   public:
    explicit Reader(const PieceEvents& events) : at_(events.words_.get()), end_(at_ + events.size_) {}
    // The next event into `event` (every field set); false at the end.
    bool Next(FlowEvent* event) {
      if (at_ == end_) return false;
      const uint64_t head = at_[0];
      event->kind = static_cast<FlowKind>(head & 0xff);
      event->target_known = (head & kKnown) != 0;
      event->ip = at_[1];
      event->target = at_[2];
      event->instructions = at_[3];
      event->time = at_[4];
      event->fallthrough = (head & kSmallFallthrough) ? event->ip + ((head >> kSizeShift) & 0xff) : 0;
      event->cycles = 0;
      event->offset = 0;
      event->enable_time = 0;
      event->message = "";
      event->image_tsc = image_tsc_;
      at_ += 5;
      if (head & kRare) GetRare(head, event);
      return true;
    }

   private:
    void GetRare(uint64_t head, FlowEvent* event);
    const uint64_t* at_;
    const uint64_t* end_;
    uint64_t image_tsc_ = 0;
  };

 private:
  // The head word: kind in the low byte, then flags; an instruction size in bits 16–23.
  static constexpr uint64_t kKnown = 1u << 8;
  static constexpr uint64_t kSmallFallthrough = 1u << 9;  // fallthrough = ip + size (< 256)
  static constexpr int kSizeShift = 16;
  // Rare fields: a word each, after the five, in this order.
  static constexpr uint64_t kFallthrough = 1u << 10;
  static constexpr uint64_t kCycles = 1u << 11;
  static constexpr uint64_t kOffset = 1u << 12;
  static constexpr uint64_t kEnableTime = 1u << 13;
  static constexpr uint64_t kMessage = 1u << 14;
  static constexpr uint64_t kImageTsc = 1u << 15;  // differs from the event before's
  static constexpr uint64_t kRare = kFallthrough | kCycles | kOffset | kEnableTime | kMessage | kImageTsc;
  static constexpr size_t kMaxWords = 11;

  // Writes the rare fields after the five words at `w`; returns the event's word count.
  size_t PutRare(uint64_t head, const FlowEvent& event, uint64_t* w);
  // Room for at least `words` (doubling; the words are not zeroed: they are written
  // once, as events come).
  void Grow(size_t words);

  std::unique_ptr<uint64_t[]> words_;
  size_t size_ = 0;      // words used
  size_t capacity_ = 0;
  size_t count_ = 0;
  uint64_t image_tsc_ = 0;  // of the last event
};

}  // namespace ptd::decoder
