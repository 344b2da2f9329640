// CallStackModel: where stacks start and end (segments, execs, the end of the trace), and
// the callers inferred below a stack that started mid-way.
#include "decoder/model/call_stack_model.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "decoder/model/call_stack_emit.h"

namespace ptd::decoder {

void CallStackModel::InferParent(uint64_t address, const FlowEvent& event) {
  Frame frame = MakeFrame(address, true, event);
  frame.plt_pending = false;
  frame.begin_instructions = segment_start_instructions_;
  frame.begin_cycles = segment_start_cycles_;
  ++inferred_in_segment_;
  stats_.Add(Stat::kInferredFrames);
  frame.begun = true;
  frame.emitted = emitted_on_stack_ + emitted_inlines_ < kFoldDepth;
  if (frame.emitted) {
    ++emitted_on_stack_;
    if (holding_) {
      // Before everything it encloses: all of the segment so far is still held.
      frame.begin_time = segment_start_time_;
      held_.insert(held_.begin(), HeldEvent::MakeBegin(segment_start_time_, frame.name));
      if (held_.size() >= kMaxHeldEvents) Release();
    } else {
      // Too late to enclose what was written: it begins now (nothing is open).
      frame.begin_time = event.time;
      frame.begin_instructions = event.instructions;
      frame.begin_cycles = event.cycles;
      EmitBegin(event.time, frame.name);
    }
  }
  frames_.insert(frames_.begin(), frame);
  RenumberFrames();
  for (size_t& depth : trap_depths_) ++depth;
  ++raise_depth_;
  stats_.RaiseTo(Stat::kMaxDepth, frames_.size());
}

void CallStackModel::BeginStack(const FlowEvent& event, bool bottom_known) {
  // The stack's output is held, so callers inferred later enclose all of it from here on
  // (and a goroutine resume's choice can still be corrected).
  holding_ = true;
  // Room for all a stack may hold, once (it is kept across Release): growing by doubling
  // would copy, and fault in, about twice the pages; reserved pages never used cost none.
  held_.reserve(kMaxHeldEvents);
  segment_start_time_ = event.time;
  segment_start_instructions_ = event.instructions;
  segment_start_cycles_ = event.cycles;
  inferred_in_segment_ = 0;
  raise_pending_ = false;
  trap_depths_.clear();
  bottom_known_ = bottom_known;
}

void CallStackModel::StartSegment(const FlowEvent& event, bool bottom_known) {
  in_segment_ = true;
  stats_.Add(Stat::kSegments);
  if (!bottom_known) stats_.Add(Stat::kInferredFrames);
  BeginStack(event, bottom_known);
  Push(MakeFrame(event.target, event.target_known, event));
  if (frames_.back().plt_pending) MaterializeTop();
}

void CallStackModel::EndSegment(const FlowEvent& event, const char* what) {
  MaterializeTop();
  if (in_segment_ || !frames_.empty()) {
    while (!frames_.empty()) PopTop(event);
  }
  detail_ = event.kind == FlowKind::kError
                ? absl::StrFormat("%s at trace offset 0x%x", event.message, event.offset)
                : absl::StrFormat("at trace offset 0x%x", event.offset);
  Release();
  sink_->Instant(event.time, what, detail_);
  in_segment_ = false;
  trap_depths_.clear();
}

void CallStackModel::OnExec(const FlowEvent& event, uint64_t previous_time, const image::ProgramStart& program) {
  // The old program ends at the exec: on the time axis (the enable has a time of its own)
  // at the exec's time, not before the events before it; on other axes where the new
  // program starts.
  FlowEvent end = event;
  if (event.enable_time != 0) {
    end.time = std::clamp(program.exec_ns, std::min(previous_time, event.time), event.time);
  }
  MaterializeTop();
  while (!frames_.empty()) PopTop(end);
  Release();
  sink_->Instant(end.time, kExecName, program.program);
  // Nothing of the old program's goroutines or traps goes on in the new one.
  parked_.clear();
  parked_count_ = 0;
  pending_ = PendingResume();
  raise_pending_ = false;
  StartSegment(event, /*bottom_known=*/true);
}

void CallStackModel::OnEnable(const FlowEvent& event, uint64_t previous_time) {
  // An exec since the last enable: the old program is gone with every frame it had.
  if (const image::ProgramStart& program = resolver_->program_start(); program.exec_ns > program_exec_ns_) {
    program_exec_ns_ = program.exec_ns;
    if (enabled_) {
      OnExec(event, previous_time, program);
      return;
    }
  }
  enabled_ = true;
  if (!in_segment_) {
    StartSegment(event);
    return;
  }
  PopMarkers(event);
  raise_pending_ = false;
  if (!event.target_known) return;
  for (size_t i = frames_.size(); i-- > 0;) {
    if (frames_[i].return_address == event.target) {
      ReturnFrom(i, event);
      return;
    }
    if (frames_[i].contains(event.target)) {
      while (frames_.size() > i + 1) PopTop(event);
      return;
    }
  }
  // Entered from code we do not see (signal handler, callback from untraced code).
  Push(MakeFrame(event.target, true, event));
}

void CallStackModel::ParentAfterBottom(uint64_t address, const FlowEvent& event) {
  Frame frame = MakeFrame(address, true, event);
  if (bottom_known_ || frame.go_role == GoRole::kGoexit) {
    // A goroutine's function returned into runtime.goexit, which never called it.
    Push(frame);
    return;
  }
  InferParent(address, event);
}

void CallStackModel::Finish(uint64_t time, uint64_t instructions, uint64_t cycles) {
  FlowEvent end;
  end.time = std::max(time, last_time_);
  last_time_ = end.time;
  end.instructions = instructions;
  end.cycles = cycles;
  MaterializeTop();
  while (!frames_.empty()) PopTop(end);
  Release();
  in_segment_ = false;
}

}  // namespace ptd::decoder
