#include "decoder/model/call_stack_model.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "decoder/model/call_stack_emit.h"

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
    TakeFunction(frame, info);
    frame.plt_pending = info.plt;
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

void CallStackModel::TakeFunction(Frame& frame, const FunctionInfo& info) {
  frame.fn_start = info.start;
  frame.fn_end = info.end;
  frame.name = info.name;
  frame.source = info.source;
  frame.symbol = info.symbol;
  frame.inlines = info.inlines;
  frame.home = HomeOf(info);
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
    TakeFunction(top, info);
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

}  // namespace ptd::decoder
