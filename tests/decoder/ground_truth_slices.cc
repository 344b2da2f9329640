#include "tests/decoder/ground_truth_slices.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "decoder/model/call_stack_model.h"

namespace ptd::decoder::testing {
namespace {

constexpr absl::string_view kOverflowLine = "I trace overflow";

struct Frame {
  std::string name;
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t home = 0;      // the function's start, also while in a part split off it (foo.cold)
  size_t begin = 0;       // instruction index (count before its first instruction)
  bool plt_pending = false;
  bool marker = false;    // [syscall]
  bool contains(uint64_t a) const { return a >= start && a < end; }
};

class Simulation {
 public:
  Simulation(const GroundTruthThread& thread, FunctionResolver* resolver, InsnClassifier* classifier,
             image::ProcessImage* image, std::function<void(uint64_t)> at_time)
      : t_(thread), resolver_(resolver), classifier_(classifier), image_(image), at_time_(std::move(at_time)) {}

  // Instruction indices before which the thread lost its (virtual) CPU, ascending.
  void set_switched_out(std::vector<size_t> switched_out) { switched_out_ = std::move(switched_out); }

  std::vector<std::string> Run(size_t first) {
    size_t event = 0;
    size_t switch_out = 0;
    while (event < t_.events.size() && t_.event_insn_index[event] <= first) {
      if (at_time_) at_time_(t_.events[event].time);
      depth_ = t_.events[event].depth;
      ++event;
    }
    if (first >= t_.ips.size()) return out_;
    StartSegment(first, depth_);
    for (size_t k = first + 1; k <= t_.ips.size(); ++k) {
      bool explained = false;
      bool syscall = false;
      while (event < t_.events.size() && t_.event_insn_index[event] == k) {
        if (at_time_) at_time_(t_.events[event].time);
        current_event_ = event;
        syscall |= t_.events[event].type == GroundTruthTag::kSyscall;
        explained |= OnEvent(t_.events[event], k);
        ++event;
      }
      if (k < t_.ips.size() && !explained) {
        // Named as of its own time: the first instruction after an execve follows only
        // events timed at the syscall's entry, before the new program was mapped.
        if (at_time_ && k < t_.ip_times.size()) at_time_(t_.ip_times[k]);
        OnInstruction(t_.ips[k], k);
      }
      while (switch_out < switched_out_.size() && switched_out_[switch_out] < k) ++switch_out;
      if (switch_out < switched_out_.size() && switched_out_[switch_out] == k && !syscall) {
        // Preempted while tracing was on (after a syscall it is off already), after the
        // branch to ips[k] (the FUP says where it resumes): the disable opens an
        // untraced child that the re-enable at the same IP ends.
        Frame f;
        f.name = CallStackModel::kUntracedName;
        f.begin = k;
        Push(std::move(f));
        Pop(k);
      }
    }
    while (!frames_.empty()) Pop(t_.ips.size());
    return out_;
  }

 private:
  Frame Make(uint64_t address, size_t k) {
    FunctionInfo info = resolver_->Resolve(address);
    Frame f;
    f.name = std::string(info.name);
    f.start = info.start;
    f.end = info.end;
    f.home = info.symbol ? (info.parent_start != 0 ? info.parent_start : info.start) : 0;
    f.begin = k;
    f.plt_pending = info.plt;
    return f;
  }
  // `address` is in another part of `f`'s function (foo and foo.cold): the same call goes
  // on there, in that part's range.
  bool MovesWithin(Frame& f, uint64_t address) {
    if (f.marker || f.plt_pending || f.home == 0) return false;
    FunctionInfo info = resolver_->Resolve(address);
    if (!info.symbol || (info.parent_start != 0 ? info.parent_start : info.start) != f.home) return false;
    f.start = info.start;
    f.end = info.end;
    return true;
  }
  void Begin(Frame& f) {
    f.plt_pending = false;
    out_.push_back(absl::StrCat("B ", f.name));
  }
  void Push(Frame f) {
    if (!frames_.empty() && frames_.back().plt_pending) Begin(frames_.back());
    frames_.push_back(std::move(f));
    if (!frames_.back().plt_pending) Begin(frames_.back());
  }
  void Pop(size_t k) {
    Frame& f = frames_.back();
    if (f.plt_pending) Begin(f);
    out_.push_back(absl::StrCat("E ", f.name, " i=", k - f.begin));
    frames_.pop_back();
  }
  void PopMarkers(size_t k) {
    while (!frames_.empty() && frames_.back().marker) Pop(k);
  }
  // The frames the model knows hold truth depths [bottom_depth_, ...].
  size_t TruthDepth() const { return bottom_depth_ + frames_.size() - 1 - popped_own_return_; }
  // `pop reg` or `pop mem` (optionally REX-prefixed).
  bool IsPop(uint64_t ip) {
    uint8_t code[2] = {0, 0};
    size_t n = image_->ReadCode(ip, code, 2);
    size_t at = n == 2 && code[0] >= 0x40 && code[0] <= 0x4f ? 1 : 0;
    if (at >= n) return false;
    return (code[at] >= 0x58 && code[at] <= 0x5f) || code[at] == 0x8f;
  }

  void StartSegment(size_t k, uint32_t depth) {
    segment_start_ = k;
    segment_out_start_ = out_.size();
    bottom_depth_ = depth;
    Frame f = Make(t_.ips[k], k);
    f.plt_pending = false;
    Push(std::move(f));
  }
  // Frames end down to truth depth `depth`; a parent below the bottom is inferred.
  void PopTo(uint32_t depth, uint64_t target, size_t k) {
    PopMarkers(k);
    while (!frames_.empty() && TruthDepth() > depth) Pop(k);
    if (frames_.empty()) {
      InferParent(target);
      bottom_depth_ = depth;
    }
  }
  void ApplyPendingUnwind(size_t k) {
    if (!unwind_pending_) return;
    unwind_pending_ = false;
    PopTo(unwind_depth_, t_.ips[k - 1], k);
  }
  // A parent below the first frame: begun at the segment start, before everything.
  void InferParent(uint64_t target) {
    Frame f = Make(target, segment_start_);
    f.plt_pending = false;
    out_.insert(out_.begin() + static_cast<std::ptrdiff_t>(segment_out_start_), absl::StrCat("B ", f.name));
    frames_.push_back(std::move(f));
  }

  // Returns true when the event explains the move to ips[k].
  bool OnEvent(const GroundTruthRecord& e, size_t k) {
    switch (e.type) {
      case GroundTruthTag::kCall: {
        PopMarkers(k);
        ApplyPendingUnwind(k);
        Frame f = Make(e.to, k);
        Push(std::move(f));
        return true;
      }
      case GroundTruthTag::kReturn:
        ApplyPendingUnwind(k);
        PopTo(e.depth, e.to, k);
        ContinueAt(e.to, k);
        return true;
      case GroundTruthTag::kUnwind:
        if (e.count == 1 && !frames_.empty() && e.from == frames_.back().start && IsPop(e.from)) {
          // A function whose first instruction pops its own return address (OCaml's
          // caml_c_call, which then jumps to C code that returns to its caller): RSP
          // says the frame ended, the code still runs in it, and PT shows it end only
          // when its code leaves it.
          ++popped_own_return_;
          return false;
        }
        // PT shows an unwind only at the branch that lands in the frame unwound to (the
        // ret/jmp after the stack switch): frames end there.
        if (classifier_->Classify(e.from).klass != InsnClass::kOther) {
          PopTo(e.depth, k < t_.ips.size() ? t_.ips[k] : e.to, k);
        } else {
          unwind_pending_ = true;
          unwind_depth_ = e.depth;
        }
        return false;
      case GroundTruthTag::kSyscall: {
        Frame f;
        f.name = CallStackModel::kSyscallName;
        f.begin = k;
        f.marker = true;
        Push(std::move(f));
        return false;
      }
      case GroundTruthTag::kLost:
        while (!frames_.empty()) Pop(k);
        out_.emplace_back(kOverflowLine);
        if (k < t_.ips.size()) StartSegment(k, ResumeDepth());
        return true;
      default:
        return false;
    }
  }

  // The truth depth where the trace resumes after the current (LOST) event: LOST has no
  // depth of its own, the first event after it that has one tells the depth before it.
  uint32_t ResumeDepth() const {
    for (size_t j = current_event_ + 1; j < t_.events.size(); ++j) {
      const GroundTruthRecord& e = t_.events[j];
      switch (e.type) {
        case GroundTruthTag::kCall: return e.depth - 1;
        case GroundTruthTag::kReturn: return e.depth + 1;
        case GroundTruthTag::kUnwind: return e.depth + static_cast<uint32_t>(e.count);
        case GroundTruthTag::kLost: return 0;
        default: break;
      }
    }
    return 0;  // nothing pops below the resumed frame: its depth does not matter
  }

  // A return into the caller's frame but outside its function (ld.so's _start calls
  // _dl_start, which returns to the next label, _dl_start_user): the caller's slice ends
  // and the function returned into begins, as the model does.
  void ContinueAt(uint64_t target, size_t k) {
    if (frames_.empty()) return;
    const Frame& top = frames_.back();
    if (top.marker || top.plt_pending || top.end == 0 || top.contains(target)) return;
    if (MovesWithin(frames_.back(), target) || !resolver_->Resolve(target).mapped) return;
    Frame next = Make(target, k);
    next.plt_pending = false;
    Pop(k);
    Push(std::move(next));
  }

  void OnInstruction(uint64_t ip, size_t k) {
    PopMarkers(k);
    if (frames_.empty()) return;
    Frame& top = frames_.back();
    if (top.contains(ip)) return;
    InsnClass klass = classifier_->Classify(t_.ips[k - 1]).klass;
    if (klass != InsnClass::kOther && !unwind_pending_ && MovesWithin(top, ip)) return;
    // Falling through into the next symbol is no branch: PT (and the model) see nothing.
    if (klass == InsnClass::kOther) return;
    if (unwind_pending_) {
      unwind_pending_ = false;
      PopTo(unwind_depth_, ip, k);
      if (frames_.back().contains(ip) || MovesWithin(frames_.back(), ip)) return;
    }
    if (popped_own_return_ > 0 && klass == InsnClass::kReturn && frames_.size() > 1) {
      --popped_own_return_;
      Pop(k);
      if (frames_.back().contains(ip)) return;
    }
    if (frames_.size() == 1 && klass == InsnClass::kReturn) {
      // A return from the first frame, entered before the trace began: the caller is
      // inferred (the ground truth has no frame for it either).
      Pop(k);
      InferParent(ip);
      return;
    }
    Frame next = Make(ip, k);
    if (top.plt_pending) {
      // Still in the PLT, or leaving it: the slice is named after where it goes.
      top.name = next.name;
      top.start = next.start;
      top.end = next.end;
      if (!next.plt_pending) Begin(top);
      return;
    }
    // A jump out of the function: a tail call.
    Pop(k);
    Push(std::move(next));  // a tail call into a PLT stub is named after its target too
  }

  const GroundTruthThread& t_;
  FunctionResolver* resolver_;
  InsnClassifier* classifier_;
  image::ProcessImage* image_;
  std::function<void(uint64_t)> at_time_;
  std::vector<Frame> frames_;
  std::vector<std::string> out_;
  std::vector<size_t> switched_out_;
  size_t current_event_ = 0;  // index of the event OnEvent is looking at
  uint32_t depth_ = 0;
  bool unwind_pending_ = false;
  size_t popped_own_return_ = 0;  // frames RSP left while their code still runs
  uint32_t unwind_depth_ = 0;
  size_t bottom_depth_ = 0;
  size_t segment_start_ = 0;
  size_t segment_out_start_ = 0;
};

}  // namespace

std::vector<std::string> ExpectedSlices(const GroundTruthThread& thread, FunctionResolver* resolver,
                                        InsnClassifier* classifier, image::ProcessImage* image,
                                        size_t first, std::function<void(uint64_t)> at_time,
                                        std::vector<size_t> switched_out) {
  Simulation simulation(thread, resolver, classifier, image, std::move(at_time));
  simulation.set_switched_out(std::move(switched_out));
  return simulation.Run(first);
}

std::vector<size_t> SwitchedOut(const GroundTruthThread& thread, const CpuSchedule& schedule) {
  std::vector<size_t> indices;
  for (const CpuInterval& interval : schedule.AllIntervals()) {
    if (interval.tid != thread.tid || interval.end_ns == kForever) continue;
    indices.push_back(static_cast<size_t>(
        std::lower_bound(thread.ip_times.begin(), thread.ip_times.end(), interval.end_ns) - thread.ip_times.begin()));
  }
  std::sort(indices.begin(), indices.end());
  return indices;
}

std::string FirstDifference(const std::vector<std::string>& expected,
                            const std::vector<std::string>& actual, size_t context) {
  size_t n = std::min(expected.size(), actual.size());
  size_t i = 0;
  while (i < n && expected[i] == actual[i]) ++i;
  if (i == n && expected.size() == actual.size()) return "";
  std::string text = absl::StrCat("first difference at line ", i, " of ", expected.size(),
                                  " expected / ", actual.size(), " decoded\n");
  size_t from = i > context ? i - context : 0;
  auto dump = [&](const char* title, const std::vector<std::string>& lines) {
    absl::StrAppend(&text, title, ":\n");
    for (size_t j = from; j < std::min(lines.size(), i + context); ++j) {
      absl::StrAppend(&text, j == i ? "  >> " : "     ", j, ": ", lines[j], "\n");
    }
  };
  dump("ground truth", expected);
  dump("decoded", actual);
  return text;
}

}  // namespace ptd::decoder::testing
