#pragma once
// CallStackModel's slice output, inlined into every part of the model (call_stack_model.cc,
// call_stack_segments.cc, call_stack_inlines.cc, call_stack_go.cc): these run for nearly
// every event. Private to decoder/model.

#include "decoder/model/call_stack_model.h"

namespace ptd::decoder {

// EmitBegin, EmitEnd, Begin and MaterializeTop run for nearly every event: inline.
[[gnu::always_inline]] inline void CallStackModel::EmitBegin(uint64_t time, absl::string_view name,
                                                             const image::SourceFrame* source) {
  if (!holding_) {
    if (source != nullptr) {
      sink_->BeginWithSource(time, name, *source);
    } else {
      sink_->Begin(time, name);
    }
    return;
  }
  HeldEvent& e = held_.emplace_back(HeldEvent::MakeBegin(time, name));
  if (source != nullptr) {
    held_sources_.push_back(source);
    e.source = static_cast<uint32_t>(held_sources_.size());
  }
  if (held_.size() >= kMaxHeldEvents) Release();
}

[[gnu::always_inline]] inline void CallStackModel::EmitEnd(uint64_t time, uint64_t instructions,
                                                           uint64_t cycles) {
  if (!holding_) {
    sink_->End(time, SliceCounts{instructions, cycles, has_cycles_});
    return;
  }
  HeldEvent& e = held_.emplace_back();
  e.time = time;
  e.counts = {instructions, cycles};
  e.begin = false;
  if (held_.size() >= kMaxHeldEvents) Release();
}

[[gnu::always_inline]] inline void CallStackModel::Begin(Frame& frame) {
  if (frame.begun) return;
  frame.begun = true;
  if (frame.emitted) {
    EmitBegin(frame.begin_time, frame.fold_marker ? kFoldName : frame.name, frame.fold_marker ? nullptr : frame.source);
  }
}

[[gnu::always_inline]] inline void CallStackModel::MaterializeTop() {
  if (!frames_.empty() && !frames_.back().begun) {
    frames_.back().plt_pending = false;
    Begin(frames_.back());
  }
}

}  // namespace ptd::decoder
