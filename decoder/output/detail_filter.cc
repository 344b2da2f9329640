#include "decoder/output/detail_filter.h"

namespace ptd::decoder {

void DetailFilterSink::WriteHeld(uint64_t now, bool all) {
  while (written_ < open_) {
    Open& frame = stack_[written_];
    if (frame.too_deep) return;  // and so is everything above it
    const bool long_enough = now >= frame.begin && now - frame.begin >= options_.min_duration;
    if (!all && !long_enough && frame.begin < options_.full_detail_from) return;
    if (frame.source != nullptr) {
      next_->BeginWithSource(frame.begin, frame.name, *frame.source);
    } else {
      next_->Begin(frame.begin, frame.name);
    }
    ++written_;
  }
}

void DetailFilterSink::Begin(uint64_t time, absl::string_view name) { BeginFrame(time, name, nullptr); }

void DetailFilterSink::BeginWithSource(uint64_t time, absl::string_view name, const image::SourceFrame& source) {
  BeginFrame(time, name, &source);
}

void DetailFilterSink::BeginFrame(uint64_t time, absl::string_view name, const image::SourceFrame* source) {
  WriteHeld(time, false);
  if (open_ == stack_.size()) stack_.emplace_back();
  Open& frame = stack_[open_++];
  frame.begin = time;
  frame.source = source;
  frame.too_deep = options_.max_depth > 0 && open_ > options_.max_depth;
  if (frame.too_deep) {
    stats_.Add(Stat::kDroppedDeep);
    return;
  }
  frame.name.assign(name.data(), name.size());
  // Nothing to wait for: written at once (its parents first).
  if (options_.min_duration == 0 || time >= options_.full_detail_from) WriteHeld(time, true);
}

void DetailFilterSink::End(uint64_t time, const SliceCounts& counts) {
  if (open_ == 0) return;
  WriteHeld(time, false);
  const Open& frame = stack_[open_ - 1];
  if (written_ == open_) {
    next_->End(time, counts);
    --written_;
    stats_.Add(Stat::kDetailKept);
  } else if (!frame.too_deep) {
    stats_.Add(Stat::kDroppedShort);
  }
  --open_;
}

void DetailFilterSink::Instant(uint64_t time, absl::string_view name, absl::string_view detail) {
  WriteHeld(time, true);
  next_->Instant(time, name, detail);
}

}  // namespace ptd::decoder
