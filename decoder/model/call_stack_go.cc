// CallStackModel: Go goroutine switches, which park a goroutine's frames and resume them.
#include "decoder/model/call_stack_model.h"

#include <algorithm>
#include <utility>

#include "decoder/model/call_stack_emit.h"

namespace ptd::decoder {

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

}  // namespace ptd::decoder
