#include "decoder/call_stack_model.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace ptd::decoder {

CallStackModel::CallStackModel(FunctionResolver* resolver, SliceSink* sink, bool has_cycles)
    : resolver_(resolver), sink_(sink), has_cycles_(has_cycles) {
  frames_.reserve(64);
}

CallStackModel::Frame CallStackModel::MakeFrame(uint64_t address, bool target_known,
                                                const FlowEvent& event) {
  Frame frame;
  if (target_known) {
    FunctionInfo info = resolver_->Resolve(address);
    frame.fn_start = info.start;
    frame.fn_end = info.end;
    frame.name = info.name;
    frame.plt_pending = info.plt;
    frame.symbol = info.symbol;
  } else {
    frame.name = kUntracedName;
  }
  frame.begin_time = event.time;
  frame.begin_instructions = event.instructions;
  frame.begin_cycles = event.cycles;
  return frame;
}

void CallStackModel::EmitBegin(uint64_t time, absl::string_view name) {
  if (!holding_) {
    sink_->Begin(time, name);
    return;
  }
  held_.push_back(HeldEvent{true, time, name, {}});
  if (held_.size() >= kMaxHeldEvents) Release();
}

void CallStackModel::EmitEnd(uint64_t time, const SliceCounts& counts) {
  if (!holding_) {
    sink_->End(time, counts);
    return;
  }
  held_.push_back(HeldEvent{false, time, {}, counts});
  if (held_.size() >= kMaxHeldEvents) Release();
}

void CallStackModel::Release() {
  for (const HeldEvent& e : held_) {
    if (e.begin) {
      sink_->Begin(e.time, e.name);
    } else {
      sink_->End(e.time, e.counts);
    }
  }
  held_.clear();
  holding_ = false;
}

void CallStackModel::Begin(Frame& frame) {
  if (frame.begun) return;
  frame.begun = true;
  if (frame.emitted) EmitBegin(frame.begin_time, frame.fold_marker ? kFoldName : frame.name);
}

void CallStackModel::MaterializeTop() {
  if (!frames_.empty() && !frames_.back().begun) {
    frames_.back().plt_pending = false;
    Begin(frames_.back());
  }
}

void CallStackModel::Push(Frame frame) {
  MaterializeTop();
  if (emitted_on_stack_ < kFoldDepth) {
    frame.emitted = true;
  } else if (emitted_on_stack_ == kFoldDepth) {
    frame.emitted = true;
    frame.fold_marker = true;
  } else {
    frame.emitted = false;
    stats_.Add(Stat::kFoldedFrames);
  }
  if (frame.emitted) ++emitted_on_stack_;
  frames_.push_back(frame);
  stats_.RaiseTo(Stat::kMaxDepth, frames_.size());
  if (!frame.plt_pending) Begin(frames_.back());
}

void CallStackModel::PopTop(const FlowEvent& event) {
  Frame& frame = frames_.back();
  if (!frame.begun) Begin(frame);
  if (frame.emitted) {
    SliceCounts counts;
    counts.instructions = event.instructions - frame.begin_instructions;
    counts.cycles = event.cycles - frame.begin_cycles;
    counts.has_cycles = has_cycles_;
    EmitEnd(event.time, counts);
    --emitted_on_stack_;
  }
  frames_.pop_back();
  while (!trap_depths_.empty() && trap_depths_.back() > frames_.size()) trap_depths_.pop_back();
}

void CallStackModel::PopMarkers(const FlowEvent& event) {
  while (!frames_.empty() && frames_.back().kind != FrameKind::kFunction) PopTop(event);
}

void CallStackModel::InferParent(uint64_t address, const FlowEvent& event) {
  Frame frame = MakeFrame(address, true, event);
  frame.plt_pending = false;
  frame.begin_instructions = segment_start_instructions_;
  frame.begin_cycles = segment_start_cycles_;
  ++inferred_in_segment_;
  stats_.Add(Stat::kInferredFrames);
  frame.begun = true;
  frame.emitted = emitted_on_stack_ < kFoldDepth;
  if (frame.emitted) {
    ++emitted_on_stack_;
    if (holding_) {
      // Before everything it encloses: all of the segment so far is still held.
      frame.begin_time = segment_start_time_;
      held_.insert(held_.begin(), HeldEvent{true, segment_start_time_, frame.name, {}});
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
  for (size_t& depth : trap_depths_) ++depth;
  ++raise_depth_;
  stats_.RaiseTo(Stat::kMaxDepth, frames_.size());
}

void CallStackModel::StartSegment(const FlowEvent& event) {
  in_segment_ = true;
  stats_.Add(Stat::kSegments);
  segment_start_time_ = event.time;
  segment_start_instructions_ = event.instructions;
  segment_start_cycles_ = event.cycles;
  inferred_in_segment_ = 0;
  raise_pending_ = false;
  trap_depths_.clear();
  stats_.Add(Stat::kInferredFrames);
  holding_ = true;
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

void CallStackModel::OnEvent(const FlowEvent& event) {
  last_time_ = event.time;
  switch (event.kind) {
    case FlowKind::kError:
      stats_.Add(Stat::kErrors);
      EndSegment(event, "decode error");
      return;
    case FlowKind::kOverflow:
      stats_.Add(Stat::kOverflows);
      EndSegment(event, "trace overflow");
      return;
    case FlowKind::kLostData:
      stats_.Add(Stat::kLost);
      EndSegment(event, "lost trace data");
      return;
    case FlowKind::kEnable:
      OnEnable(event);
      return;
    default:
      break;
  }
  if (!in_segment_) return;  // nothing known until tracing (re)starts somewhere
  switch (event.kind) {
    case FlowKind::kCall:
      OnCall(event);
      break;
    case FlowKind::kReturn:
      OnReturn(event);
      break;
    case FlowKind::kJump:
      OnJump(event);
      break;
    case FlowKind::kSyscall: {
      PopMarkers(event);
      Frame frame;
      frame.kind = FrameKind::kSyscall;
      frame.name = kSyscallName;
      frame.return_address = event.fallthrough;
      frame.begin_time = event.time;
      frame.begin_instructions = event.instructions;
      frame.begin_cycles = event.cycles;
      Push(frame);
      break;
    }
    case FlowKind::kDisable: {
      if (!frames_.empty() && frames_.back().kind != FrameKind::kFunction) break;
      Frame frame;
      frame.kind = FrameKind::kUntraced;
      frame.name = kUntracedName;
      frame.begin_time = event.time;
      frame.begin_instructions = event.instructions;
      frame.begin_cycles = event.cycles;
      Push(frame);
      break;
    }
    case FlowKind::kTrapPush:
      trap_depths_.push_back(frames_.size());
      break;
    case FlowKind::kTrapPop:
      if (!trap_depths_.empty()) trap_depths_.pop_back();
      break;
    case FlowKind::kRaise:
      PopMarkers(event);
      // The stack now is the handler's; PT shows it at the ret/jmp that follows, which
      // enters the handler: the frames above the innermost trap end there.
      raise_depth_ = frames_.size();
      if (!trap_depths_.empty()) {
        raise_depth_ = std::max<size_t>(trap_depths_.back(), 1);
        trap_depths_.pop_back();
      }
      raise_pending_ = true;
      break;
    default:
      break;
  }
}

void CallStackModel::OnCall(const FlowEvent& event) {
  PopMarkers(event);
  raise_pending_ = false;
  stats_.Add(Stat::kCalls);
  // "call next; pop reg" reads the PC; it never returns, and the CPU does not push it
  // on its return stack either.
  if (event.target_known && event.target == event.fallthrough) return;
  Frame frame = MakeFrame(event.target, event.target_known, event);
  frame.return_address = event.fallthrough;
  Push(frame);
}

void CallStackModel::UnwindTo(size_t depth, const FlowEvent& event) {
  if (frames_.size() > depth) stats_.Add(Stat::kUnwinds);
  while (frames_.size() > depth) PopTop(event);
}

size_t CallStackModel::AncestorHolding(uint64_t address, bool mid_function) const {
  for (size_t i = frames_.size() - 1; i-- > 0;) {
    const Frame& f = frames_[i];
    // Only symbol ranges: without symbols a "function" is a whole mapping or dump, and
    // any jump inside it would look like a return into an ancestor.
    if (f.kind == FrameKind::kFunction && f.symbol && f.contains(address) &&
        (!mid_function || address != f.fn_start)) {
      return i;
    }
  }
  return kNoFrame;
}

void CallStackModel::OnReturn(const FlowEvent& event) {
  PopMarkers(event);
  stats_.Add(Stat::kReturns);
  if (raise_pending_) {
    raise_pending_ = false;
    UnwindTo(raise_depth_, event);
    return;
  }
  if (frames_.empty()) {
    if (event.target_known) InferParent(event.target, event);
    return;
  }
  if (!event.target_known) {
    PopTop(event);
    return;
  }
  for (size_t i = frames_.size(); i-- > 0;) {
    if (frames_[i].return_address == event.target) {
      if (frames_.size() - i > 1) stats_.Add(Stat::kUnwinds);
      while (frames_.size() > i) PopTop(event);
      if (frames_.empty()) {
        InferParent(event.target, event);
      } else {
        ContinueAt(event);
      }
      return;
    }
  }
  // A return into the middle of a function further down the stack: an unwinder that
  // finishes with a ret (C++ landing pads reached through _Unwind_*).
  if (size_t i = AncestorHolding(event.target, false); i != kNoFrame) {
    UnwindTo(i + 1, event);
    return;
  }
  bool reentered = frames_.back().return_address == 0 && frames_.size() > 1;
  PopTop(event);
  if (frames_.empty()) {
    InferParent(event.target, event);
    return;
  }
  if (frames_.back().contains(event.target)) return;
  if (reentered) {
    // Returned from a handler/callback into code we did not see call it
    // (e.g. a signal trampoline): a child of the interrupted frame.
    Push(MakeFrame(event.target, true, event));
    return;
  }
  // A return that matches nothing: the stack is what we inferred; treat the target as
  // where the current frame continues.
  Frame frame = MakeFrame(event.target, true, event);
  frame.return_address = frames_.back().return_address;
  PopTop(event);
  Push(frame);
}

// Execution goes on at `event.target` in the frame just returned to. When that is not
// in the frame's function (a call was the last instruction of its function and what
// follows is the next function), the frame goes on as that function, as a jump there
// would make it: the decoder drops jumps inside one function, so no later jump can be
// relied on to rename it.
void CallStackModel::ContinueAt(const FlowEvent& event) {
  const Frame& top = frames_.back();
  if (top.kind != FrameKind::kFunction || top.plt_pending || top.contains(event.target)) return;
  if (!resolver_->Resolve(event.target).mapped) return;
  Frame frame = MakeFrame(event.target, true, event);
  frame.return_address = top.return_address;
  PopTop(event);
  Push(frame);
}

void CallStackModel::OnJump(const FlowEvent& event) {
  PopMarkers(event);
  if (raise_pending_) {
    raise_pending_ = false;
    UnwindTo(raise_depth_, event);
    return;
  }
  if (frames_.empty() || !event.target_known) return;
  if (frames_.back().contains(event.target)) return;
  if (!frames_.back().plt_pending) {
    // A jump into the middle of a function further down the stack: longjmp (or another
    // stack switch) back into that frame. A jump to a function's entry is a tail call.
    if (size_t i = AncestorHolding(event.target, true); i != kNoFrame) {
      UnwindTo(i + 1, event);
      return;
    }
  }
  Frame& top = frames_.back();
  FunctionInfo info = resolver_->Resolve(event.target);
  if (top.plt_pending && !top.begun) {
    // Still inside the PLT (PLT0, lazy binding) or leaving it: the slice takes the
    // name of where the stub goes.
    top.fn_start = info.start;
    top.fn_end = info.end;
    top.name = info.name;
    top.symbol = info.symbol;
    if (!info.plt) MaterializeTop();
    return;
  }
  stats_.Add(Stat::kTailCalls);
  Frame frame = MakeFrame(event.target, true, event);
  frame.return_address = top.return_address;
  PopTop(event);
  Push(frame);
}

void CallStackModel::OnEnable(const FlowEvent& event) {
  if (!in_segment_) {
    StartSegment(event);
    return;
  }
  PopMarkers(event);
  raise_pending_ = false;
  if (!event.target_known) return;
  for (size_t i = frames_.size(); i-- > 0;) {
    if (frames_[i].return_address == event.target) {
      while (frames_.size() > i) PopTop(event);
      if (frames_.empty()) {
        InferParent(event.target, event);
      } else {
        ContinueAt(event);
      }
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

void CallStackModel::Finish(uint64_t time, uint64_t instructions, uint64_t cycles) {
  FlowEvent end;
  end.time = std::max(time, last_time_);
  end.instructions = instructions;
  end.cycles = cycles;
  MaterializeTop();
  while (!frames_.empty()) PopTop(end);
  Release();
  in_segment_ = false;
}

}  // namespace ptd::decoder
