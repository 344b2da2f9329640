#include "decoder/model/call_stack_model.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace ptd::decoder {
namespace {

// The start of the function `info` is part of: its own, or the function it was split off.
uint64_t HomeOf(const FunctionInfo& info) { return info.parent_start != 0 ? info.parent_start : info.start; }

}  // namespace

CallStackModel::CallStackModel(FunctionResolver* resolver, SliceSink* sink, bool has_cycles)
    : resolver_(resolver), sink_(sink), has_cycles_(has_cycles) {
  frames_.reserve(64);
}

CallStackModel::Frame CallStackModel::FrameBeginningAt(const FlowEvent& event) {
  Frame frame;
  frame.begin_time = event.time;
  frame.begin_instructions = event.instructions;
  frame.begin_cycles = event.cycles;
  return frame;
}

CallStackModel::Frame CallStackModel::MakeFrame(uint64_t address, bool target_known,
                                                const FlowEvent& event) {
  Frame frame = FrameBeginningAt(event);
  if (target_known) {
    FunctionInfo info = resolver_->Resolve(address);
    frame.fn_start = info.start;
    frame.fn_end = info.end;
    frame.name = info.name;
    frame.source = info.source;
    frame.plt_pending = info.plt;
    frame.symbol = info.symbol;
    frame.inlines = info.inlines;
    frame.home = HomeOf(info);
    frame.go_role = GoRoleOf(info.name);
  } else {
    frame.name = kUntracedName;
  }
  return frame;
}

CallStackModel::GoRole CallStackModel::GoRoleOf(absl::string_view name) {
  // Two byte compares for a name that is not the Go runtime's.
  if (name.size() < 12 || name[0] != 'r' || !absl::StartsWith(name, "runtime.")) return GoRole::kNone;
  name.remove_prefix(8);
  absl::ConsumeSuffix(&name, ".abi0");  // assembly functions' ABI0 symbols
  if (name == "mcall") return GoRole::kMcall;
  if (name == "morestack") return GoRole::kMorestack;
  if (name == "gogo") return GoRole::kGogo;
  if (name == "goexit1") return GoRole::kExit;
  if (name == "goexit") return GoRole::kGoexit;
  // Go 1.21+ calls mcall(recovery) from (*_panic).nextDefer.
  if (name == "gopanic" || name == "(*_panic).nextDefer") return GoRole::kGopanic;
  return GoRole::kNone;
}

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

void CallStackModel::Release() {
  for (const HeldEvent& e : held_) {
    if (e.begin && e.source != 0) {
      sink_->BeginWithSource(e.time, absl::string_view(e.name.data, e.name.size), *held_sources_[e.source - 1]);
    } else if (e.begin) {
      sink_->Begin(e.time, absl::string_view(e.name.data, e.name.size));
    } else {
      sink_->End(e.time, SliceCounts{e.counts.instructions, e.counts.cycles, has_cycles_});
    }
  }
  held_.clear();
  held_sources_.clear();
  holding_ = false;
  pending_.active = false;  // its Begins are written: the choice stands
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

void CallStackModel::Push(const Frame& pushed) {
  MaterializeTop();
  Frame& frame = frames_.emplace_back(pushed);
  frame.serial = ++last_serial_;
  // Inlined slices take depth too (Perfetto's limit is on all nesting).
  const size_t depth = emitted_on_stack_ + emitted_inlines_;
  if (depth < kFoldDepth) {
    frame.emitted = true;
  } else if (depth == kFoldDepth) {
    frame.emitted = true;
    frame.fold_marker = true;
  } else {
    frame.emitted = false;
    stats_.Add(Stat::kFoldedFrames);
  }
  if (frame.emitted) ++emitted_on_stack_;
  stats_.RaiseTo(Stat::kMaxDepth, frames_.size());
  if (!frame.plt_pending) Begin(frame);
}

[[gnu::always_inline]] inline void CallStackModel::PushMarker(FrameKind kind, const FlowEvent& event) {
  Frame frame = FrameBeginningAt(event);
  frame.kind = kind;
  if (kind == FrameKind::kSyscall) {
    frame.name = kSyscallName;
    frame.return_address = event.fallthrough;
  } else {
    frame.name = kUntracedName;
  }
  Push(frame);
}

void CallStackModel::PopTop(const FlowEvent& event) {
  // A resumed frame ended other than by the return its parked copy expects: the choice
  // among the stacks parked at its PC stands.
  if (pending_.active && frames_.size() - 1 < pending_.unchecked) pending_.active = false;
  Frame& frame = frames_.back();
  if (!frame.begun) Begin(frame);
  while (frame.inline_open > 0) CloseInline(event.time, event.instructions, event.cycles);
  if (frame.emitted) {
    EmitEnd(event.time, event.instructions - frame.begin_instructions, event.cycles - frame.begin_cycles);
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

void CallStackModel::OnEvent(const FlowEvent& event) {
  const uint64_t previous_time = last_time_;
  last_time_ = event.time;
  if (run_known_) FollowInlines(event);
  OnEventAfterRun(event, previous_time);
  StartRun(event);
}

void CallStackModel::StartRun(const FlowEvent& event) {
  switch (event.kind) {
    case FlowKind::kCall:
    case FlowKind::kReturn:
    case FlowKind::kJump:
    case FlowKind::kEnable:
      run_known_ = event.target_known;
      break;
    case FlowKind::kTrapPush:
    case FlowKind::kTrapPop:
    case FlowKind::kRaise:
      return;  // mid-run: the run goes on
    default:
      run_known_ = false;
      return;
  }
  run_ip_ = event.target;
  run_time_ = event.time;
  run_instructions_ = event.instructions;
  run_cycles_ = event.cycles;
}

void CallStackModel::FollowInlines(const FlowEvent& event) {
  switch (event.kind) {
    case FlowKind::kCall:
    case FlowKind::kReturn:
    case FlowKind::kJump:
    case FlowKind::kSyscall:
      break;
    default:
      return;
  }
  // A resumed goroutine's frames are still being told apart by their held Begins.
  if (frames_.empty() || pending_.active || event.instructions <= run_instructions_) return;
  const Frame& top = frames_.back();
  if (top.kind != FrameKind::kFunction || !top.inlines || top.plt_pending || !top.contains(run_ip_)) return;
  const std::vector<image::ProcessImage::SourceFrameChange>* changes = nullptr;
  // A run not walked through to the event (not straight after all) takes only the
  // changes found on the way.
  resolver_->SourceFramesAlong(run_ip_, event.ip, &changes);
  if (changes == nullptr) return;
  const uint64_t count = event.instructions - run_instructions_;
  for (const image::ProcessImage::SourceFrameChange& change : *changes) {
    if (change.index >= count) break;
    SetInlineChain(change.frame, change.index, count, event);
  }
}

void CallStackModel::SetInlineChain(const image::SourceFrame* innermost, uint64_t index, uint64_t count,
                                    const FlowEvent& event) {
  // The open slices are always one whole chain, so the same innermost inlined frame
  // means the same chain: the common case (every run's first instruction) ends here.
  const image::SourceFrame* innermost_inlined = innermost != nullptr && innermost->inlined ? innermost : nullptr;
  const Frame& current = frames_.back();
  if (innermost_inlined == (current.inline_open > 0 ? open_inlines_.back().frame : nullptr)) return;
  chain_.clear();
  for (const image::SourceFrame* f = innermost; f != nullptr && f->inlined; f = f->parent) chain_.push_back(f);
  std::reverse(chain_.begin(), chain_.end());
  Frame& top = frames_.back();
  const size_t first = open_inlines_.size() - top.inline_open;
  size_t same = 0;
  while (same < top.inline_open && same < chain_.size() && open_inlines_[first + same].frame == chain_[same]) ++same;
  if (same == top.inline_open && same == chain_.size()) return;
  // Instruction `index` begins at the run's counts plus `index`; time by instruction.
  auto interpolate = [&](uint64_t from, uint64_t to) {
    if (to <= from) return from;
    return from + static_cast<uint64_t>(static_cast<unsigned __int128>(to - from) * index / count);
  };
  const uint64_t time = interpolate(run_time_, event.time);
  const uint64_t instructions = run_instructions_ + index;
  const uint64_t cycles = interpolate(run_cycles_, event.cycles);
  while (top.inline_open > same) CloseInline(time, instructions, cycles);
  MaterializeTop();
  for (size_t i = same; i < chain_.size(); ++i) {
    // Below the fold depth only, so a frame pushed above still finds room for the marker.
    const bool emitted = top.emitted && !top.fold_marker && emitted_on_stack_ + emitted_inlines_ < kFoldDepth;
    open_inlines_.push_back(OpenInline{chain_[i], time, instructions, cycles, emitted});
    ++top.inline_open;
    if (emitted) ++emitted_inlines_;
    if (emitted) EmitBegin(time, chain_[i]->name.empty() ? absl::string_view("[inlined]") : chain_[i]->name, chain_[i]);
  }
}

void CallStackModel::CloseInline(uint64_t time, uint64_t instructions, uint64_t cycles) {
  const OpenInline& open = open_inlines_.back();
  if (open.emitted) {
    EmitEnd(time, instructions - open.begin_instructions, cycles - open.begin_cycles);
    --emitted_inlines_;
  }
  open_inlines_.pop_back();
  --frames_.back().inline_open;
}

void CallStackModel::OnEventAfterRun(const FlowEvent& event, uint64_t previous_time) {
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
      OnEnable(event, previous_time);
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
    case FlowKind::kSyscall:
      OnSyscall(event);
      break;
    case FlowKind::kDisable:
      if (frames_.empty() || frames_.back().kind == FrameKind::kFunction) OnDisable(event);
      break;
    case FlowKind::kTrapPush:
    case FlowKind::kTrapPop:
    case FlowKind::kRaise:
      OnTrap(event);
      break;
    default:
      break;
  }
}

void CallStackModel::OnSyscall(const FlowEvent& event) {
  PopMarkers(event);
  PushMarker(FrameKind::kSyscall, event);
}

void CallStackModel::OnDisable(const FlowEvent& event) { PushMarker(FrameKind::kUntraced, event); }

void CallStackModel::OnTrap(const FlowEvent& event) {
  switch (event.kind) {
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
  if (frame.go_role == GoRole::kMcall && !(!frames_.empty() && frames_.back().go_role == GoRole::kGopanic)) {
    // gopark, gosched, goexit1, gopanic's recovery, asyncPreempt2: the goroutine resumes
    // at the call's return address.
    GoPark(event.fallthrough, event);
    frame.return_address = 0;  // g0's bottom: it never returns
  }
  Push(frame);
}

void CallStackModel::UnwindTo(size_t depth, const FlowEvent& event) {
  if (frames_.size() > depth) stats_.Add(Stat::kUnwinds);
  while (frames_.size() > depth) PopTop(event);
}

void CallStackModel::RenumberFrames() {
  for (Frame& f : frames_) f.serial = ++last_serial_;
}

size_t CallStackModel::AncestorHolding(uint64_t address, bool mid_function) {
  const size_t below_top = frames_.size() == 0 ? 0 : frames_.size() - 1;
  // The frames near the top come and go: scanned each time. Those below the last
  // multiple of kAncestorBlock stay for long (an interpreter's loop, main): their
  // answer is kept, named by the serial of the highest of them.
  const size_t split = below_top & ~(kAncestorBlock - 1);
  if (size_t i = ScanForAncestorHolding(split, below_top, address, mid_function); i != kNoFrame) return i;
  if (split == 0) return kNoFrame;
  const uint64_t serial = frames_[split - 1].serial;
  const AncestorAnswer* kept = ancestor_answers_.Find(address);
  if (kept == nullptr || kept->serial != serial || kept->mid_function != mid_function) {
    kept = &ancestor_answers_.Put(
        address, AncestorAnswer{serial, mid_function, ScanForAncestorHolding(0, split, address, mid_function)});
  }
  return kept->frame;
}

bool CallStackModel::MoveWithinFunction(Frame& frame, const FunctionInfo& info) {
  if (frame.kind != FrameKind::kFunction || !frame.symbol || !info.symbol || frame.home != HomeOf(info)) {
    return false;
  }
  frame.fn_start = info.start;
  frame.fn_end = info.end;
  frame.inlines = info.inlines;
  frame.serial = ++last_serial_;
  return true;
}

size_t CallStackModel::AncestorRunning(const FunctionInfo& info) const {
  if (!info.symbol || frames_.size() < 2) return kNoFrame;
  const uint64_t home = HomeOf(info);
  for (size_t i = frames_.size() - 1; i-- > 0;) {
    const Frame& f = frames_[i];
    if (f.kind == FrameKind::kFunction && f.symbol && f.home == home) return i;
  }
  return kNoFrame;
}

size_t CallStackModel::ScanForAncestorHolding(size_t begin, size_t end, uint64_t address, bool mid_function) const {
  // By pointer and range first.
  const Frame* const first = frames_.data() + begin;
  for (const Frame* f = frames_.data() + end; f != first;) {
    --f;
    if (!f->contains(address)) continue;
    // Only symbol ranges: without symbols a "function" is a whole mapping or dump, and
    // any jump inside it would look like a return into an ancestor.
    if (f->kind == FrameKind::kFunction && f->symbol && (!mid_function || address != f->fn_start)) {
      return static_cast<size_t>(f - frames_.data());
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
    if (event.target_known) ParentAfterBottom(event.target, event);
    return;
  }
  if (!event.target_known) {
    PopTop(event);
    return;
  }
  if (pending_.active && frames_.size() <= pending_.unchecked) {
    // Returning from a frame of a resumed goroutine while others wait at its PC.
    const size_t i = frames_.size() - 1;
    if (frames_[i].return_address == event.target) {
      pending_.unchecked = i;
      if (i == 0) pending_.active = false;
    } else if (frames_[i].return_address == 0) {
      // A frame entered, not called (asyncPreempt from a signal's return, a goroutine's
      // function): nothing to check it against; the choice stands.
      pending_.active = false;
    } else if (!SwapResumedStack(i, event)) {
      Unresume(i);
    }
  }
  for (size_t i = frames_.size(); i-- > 0;) {
    if (frames_[i].return_address == event.target) {
      if (frames_.size() - i > 1) stats_.Add(Stat::kUnwinds);
      ReturnFrom(i, event);
      return;
    }
  }
  // A return into the middle of a function further down the stack: an unwinder that
  // finishes with a ret (C++ landing pads reached through _Unwind_*).
  if (size_t i = AncestorHolding(event.target, false); i != kNoFrame) {
    UnwindTo(i + 1, event);
    return;
  }
  const FunctionInfo target = resolver_->Resolve(event.target);
  if (size_t i = AncestorRunning(target); i != kNoFrame) {
    UnwindTo(i + 1, event);
    MoveWithinFunction(frames_.back(), target);
    return;
  }
  bool reentered = frames_.back().return_address == 0 && frames_.size() > 1;
  PopTop(event);
  if (frames_.empty()) {
    ParentAfterBottom(event.target, event);
    return;
  }
  if (frames_.back().contains(event.target) || MoveWithinFunction(frames_.back(), target)) return;
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

// Pops frame `i` (whose return address is `event.target`) and every frame above it.
void CallStackModel::ReturnFrom(size_t i, const FlowEvent& event) {
  while (frames_.size() > i) PopTop(event);
  if (frames_.empty()) {
    ParentAfterBottom(event.target, event);
  } else {
    ContinueAt(event);
  }
}

// Execution goes on at `event.target` in the frame just returned to. When that is not
// in the frame's function (a call was the last instruction of its function and what
// follows is the next function), the frame goes on as that function, as a jump there
// would make it: the decoder drops jumps inside one function, so no later jump can be
// relied on to rename it.
void CallStackModel::ContinueAt(const FlowEvent& event) {
  Frame& top = frames_.back();
  if (top.kind != FrameKind::kFunction || top.plt_pending || top.contains(event.target)) return;
  const FunctionInfo info = resolver_->Resolve(event.target);
  if (!info.mapped || MoveWithinFunction(top, info)) return;
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
  if (frames_.back().go_role == GoRole::kGogo && !IsGogoHelper(event.target)) {
    GoResume(event);
    return;
  }
  FunctionInfo info = resolver_->Resolve(event.target);
  if (!frames_.back().plt_pending) {
    // Into or out of a part split off the function (foo.cold): the same call goes on.
    if (MoveWithinFunction(frames_.back(), info)) return;
    // A jump into the middle of a function further down the stack: longjmp (or another
    // stack switch) back into that frame. A jump to a function's entry is a tail call.
    if (size_t i = AncestorHolding(event.target, true); i != kNoFrame) {
      UnwindTo(i + 1, event);
      return;
    }
    // The same into a split-off part of one (an unwinder's jump to a catch block).
    if (info.parent_start != 0) {
      if (size_t i = AncestorRunning(info); i != kNoFrame) {
        UnwindTo(i + 1, event);
        MoveWithinFunction(frames_.back(), info);
        return;
      }
    }
  }
  Frame& top = frames_.back();
  if (top.plt_pending && !top.begun) {
    // Still inside the PLT (PLT0, lazy binding) or leaving it: the slice takes the
    // name of where the stub goes.
    top.fn_start = info.start;
    top.fn_end = info.end;
    top.name = info.name;
    top.source = info.source;
    top.symbol = info.symbol;
    top.inlines = info.inlines;
    top.home = HomeOf(info);
    top.serial = ++last_serial_;
    if (!info.plt) MaterializeTop();
    return;
  }
  stats_.Add(Stat::kTailCalls);
  Frame frame = MakeFrame(event.target, true, event);
  frame.return_address = top.return_address;
  if (top.go_role == GoRole::kGogo) frame.go_role = GoRole::kGogo;  // runtime.gogo → gogo<>
  PopTop(event);
  Push(frame);
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

bool CallStackModel::IsGogoHelper(uint64_t address) {
  // Go 1.17+: runtime.gogo jumps to gogo<> (ELF symbol "gogo"), whose JMP resumes.
  FunctionInfo info = resolver_->Resolve(address);
  return info.start == address && info.name == "gogo";
}

void CallStackModel::SwitchStacks(const FlowEvent& event, bool bottom_known) {
  while (!frames_.empty()) PopTop(event);
  Release();
  stats_.Add(Stat::kGoroutineSwitches);
  BeginStack(event, bottom_known);
}

void CallStackModel::GoPark(uint64_t resume_pc, const FlowEvent& event) {
  MaterializeTop();
  Park(resume_pc, frames_.size());
  SwitchStacks(event, /*bottom_known=*/true);
}

void CallStackModel::Park(uint64_t resume_pc, size_t count) {
  // goexit1's mcall(goexit0) ends the goroutine: nothing to resume.
  const bool exiting = count > 0 && frames_[count - 1].go_role == GoRole::kExit;
  if (!exiting && count > 0 && resume_pc != 0) {
    if (parked_count_ >= kMaxParkedStacks) {
      // The oldest at this PC, else at any (no deque in parked_ is left empty).
      auto victim = parked_.find(resume_pc);
      if (victim == parked_.end()) victim = parked_.begin();
      victim->second.pop_front();
      if (victim->second.empty()) parked_.erase(victim);
      --parked_count_;
      stats_.Add(Stat::kGoroutineStacksDropped);
    }
    parked_[resume_pc].push_back(
        ParkedStack{std::vector<Frame>(frames_.begin(), frames_.begin() + count), bottom_known_, ++park_order_});
    ++parked_count_;
    last_parked_pc_ = resume_pc;
  }
}

void CallStackModel::Restore(const std::vector<Frame>& frames, size_t count, const FlowEvent& event) {
  for (size_t i = 0; i < count; ++i) {
    Frame frame = frames[i];
    frame.begin_time = event.time;
    frame.begin_instructions = event.instructions;
    frame.begin_cycles = event.cycles;
    frame.emitted = frame.fold_marker = frame.begun = frame.plt_pending = false;
    frame.inline_open = 0;  // its inlined slices ended when it was parked
    Push(frame);
  }
}

void CallStackModel::GoResume(const FlowEvent& event) {
  const uint64_t pc = event.target;
  // Switches that usually come back to the same goroutine are followed lazily, so its
  // frames stay whole: a stack growth (morestack, entered from the function's call to
  // morestack_noctxt, runs newstack on g0, whose gogo goes back into that function) and
  // a recovered panic (gopanic's mcall(recovery): gogo goes into the deferring frame).
  // gogo into a frame below such a switch is a return to it; anywhere else (newstack
  // preempted the goroutine) the frames below the switch are parked now.
  for (size_t s = frames_.size(); s-- > 0;) {
    const Frame& at = frames_[s];
    const bool lazy = at.go_role == GoRole::kMorestack ||
                      (at.go_role == GoRole::kMcall && s > 0 && frames_[s - 1].go_role == GoRole::kGopanic);
    if (!lazy) continue;
    if (at.return_address == pc) {
      UnwindTo(s, event);
      return;
    }
    for (size_t i = s; i-- > 0;) {
      const Frame& f = frames_[i];
      if (f.kind == FrameKind::kFunction && f.symbol && f.contains(pc) && pc != f.fn_start) {
        UnwindTo(i + 1, event);
        return;
      }
    }
    MaterializeTop();
    Park(at.return_address, s);
    break;
  }
  SwitchStacks(event, /*bottom_known=*/false);
  if (auto it = parked_.find(pc); it != parked_.end() && !it->second.empty()) {
    // FIFO among the stacks parked at this PC (every goroutine parked by gopark resumes
    // at the same PC); the returns that follow correct the choice (SwapResumedStack,
    // Unresume).
    ParkedStack stack = std::move(it->second.front());
    it->second.pop_front();
    --parked_count_;
    if (it->second.empty()) parked_.erase(it);
    bottom_known_ = stack.bottom_known;
    Restore(stack.frames, stack.frames.size(), event);
    // Kept open until the returns that follow confirm it (or another parked stack, or
    // none, fits them better).
    if (stack.frames.size() <= kFoldDepth && held_.size() == stack.frames.size()) {
      pending_.active = true;
      pending_.resume_pc = pc;
      pending_.unchecked = stack.frames.size();
      pending_.stack = std::move(stack);
    }
    return;
  }
  FunctionInfo info = resolver_->Resolve(pc);
  if (info.symbol && info.start == pc) {
    // A new goroutine (newproc's gobuf: its function, goexit as the return address).
    stats_.Add(Stat::kGoroutinesStarted);
    bottom_known_ = true;
    Push(MakeFrame(pc, true, event));
    return;
  }
  // Panic recovery from a caller of mcall not recognised above: recovery's gogo
  // continues the deferring frame of the stack parked just before (nothing else ran on
  // this thread in between).
  if (auto it = parked_.find(last_parked_pc_);
      it != parked_.end() && !it->second.empty() && it->second.back().order == park_order_) {
    const std::vector<Frame>& frames = it->second.back().frames;
    for (size_t i = frames.size(); i-- > 0;) {
      const Frame& f = frames[i];
      if (f.kind == FrameKind::kFunction && f.symbol && f.contains(pc) && pc != f.fn_start) {
        ParkedStack stack = std::move(it->second.back());
        it->second.pop_back();
        --parked_count_;
        if (it->second.empty()) parked_.erase(it);
        stats_.Add(Stat::kUnwinds);
        bottom_known_ = stack.bottom_known;
        Restore(stack.frames, i + 1, event);
        return;
      }
    }
  }
  // A goroutine parked before the trace began, or on another thread: its function is
  // inferred, and its callers as it returns into them.
  stats_.Add(Stat::kGoroutinesUnknown);
  stats_.Add(Stat::kInferredFrames);
  Push(MakeFrame(pc, true, event));
}

bool CallStackModel::SwapResumedStack(size_t i, const FlowEvent& event) {
  auto it = parked_.find(pending_.resume_pc);
  if (it == parked_.end() || !holding_ || held_.size() <= i) return false;
  const std::vector<Frame>& chosen = pending_.stack.frames;
  const size_t n = chosen.size();
  for (ParkedStack& other : it->second) {
    const size_t m = other.frames.size();
    if (m + i < n || m > kFoldDepth) continue;
    // Frames align from the top (the frame that parked); `j` is other's frame at i.
    const size_t j = i + m - n;
    if (other.frames[j].return_address != event.target) continue;
    bool same_above = true;
    for (size_t k = 1; i + k < n && same_above; ++k) {
      same_above = other.frames[j + k].return_address == chosen[i + k].return_address &&
                   other.frames[j + k].fn_start == chosen[i + k].fn_start;
    }
    if (!same_above) continue;
    // frames_[0, i] and their Begins, held_[0, i] (nothing of theirs ended yet), become
    // other's [0, j], begun at the resume as they were.
    const Frame resumed = frames_[0];
    std::vector<Frame> frames(other.frames.begin(), other.frames.begin() + j + 1);
    std::vector<HeldEvent> begins;
    for (Frame& f : frames) {
      f.begin_time = resumed.begin_time;
      f.begin_instructions = resumed.begin_instructions;
      f.begin_cycles = resumed.begin_cycles;
      f.emitted = f.begun = true;
      f.fold_marker = f.plt_pending = false;
      f.inline_open = 0;
      begins.push_back(HeldEvent::MakeBegin(f.begin_time, f.name));
    }
    frames_.erase(frames_.begin(), frames_.begin() + i + 1);
    frames_.insert(frames_.begin(), frames.begin(), frames.end());
    RenumberFrames();
    held_.erase(held_.begin(), held_.begin() + i + 1);
    held_.insert(held_.begin(), begins.begin(), begins.end());
    emitted_on_stack_ = emitted_on_stack_ - (i + 1) + (j + 1);
    stats_.RaiseTo(Stat::kMaxDepth, frames_.size());
    // The stack chosen first is still parked; it takes other's place in the queue.
    std::swap(other, pending_.stack);
    other.order = pending_.stack.order;
    pending_.unchecked = j;  // the return under way checks frame j
    if (j == 0) pending_.active = false;
    stats_.Add(Stat::kGoroutineSwaps);
    return true;
  }
  return false;
}

void CallStackModel::Unresume(size_t i) {
  frames_.erase(frames_.begin(), frames_.begin() + i);
  held_.erase(held_.begin(), held_.begin() + i);
  emitted_on_stack_ -= i;
  frames_[0].return_address = 0;
  RenumberFrames();
  bottom_known_ = false;
  parked_[pending_.resume_pc].push_front(std::move(pending_.stack));
  ++parked_count_;
  pending_.active = false;
  stats_.Add(Stat::kGoroutinesUnknown);
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
