#pragma once
// Per-thread call stacks from control-flow events: pure logic, no libipt.
//
// Rules (docs/decoder.md has the reasoning):
// - call → child frame; return → ends frames up to the one whose return address is the
//   target (one normally; several for longjmp, C++ unwinding, fibers).
// - jump out of the current function → tail call: the frame is replaced by a sibling.
// - call into a PLT stub → one frame named after the stub's eventual jump target.
// - a segment starts mid-stack: the first frame is inferred; returns past the bottom
//   infer parents, which begin just before the segment's first frame.
// - syscall → "[syscall]" child until tracing resumes; other disabled regions →
//   "[untraced]"; re-entry elsewhere (signal handler, callback) → child frame that ends
//   when it returns or when execution resumes in a frame below.
// - OCaml exceptions: a trap push remembers the depth, a raise unwinds to it (at the
//   ret/jmp that enters the handler).
// - a jump into the middle of, or a return into, a function further down the stack
//   (longjmp, C++ landing pads) unwinds to that frame.
// - exec (at an enable, the image holds a program an exec started since the last one):
//   every frame of the old program ends at the exec, an instant names the new program,
//   and its stack starts empty at its entry.
// - decode error, overflow, lost data: instant event naming the cause, every frame closed,
//   a new segment at the next enable.
// - inlined calls (DWARF): every jump in a function with inlined code makes an event, so
//   the run between two events is straight; along it the innermost inlined frame is
//   looked up per instruction (cached per run by the image), and the top frame's
//   inlined slices are closed and opened where it changes, with exact instruction
//   counts and times interpolated by instruction between the events. A frame's inlined
//   slices stay open while it calls out and end with it (return, unwind, exception).
// - frames deeper than kFoldDepth are folded into one marked slice (Perfetto drops slices
//   nested deeper than 512).
// - Go goroutine switches (runtime.mcall; runtime.morestack when newstack switches) park
//   the goroutine's frames under the PC it resumes at; runtime.gogo's jump resumes the
//   stack parked there (FIFO, corrected by the returns that follow) or starts a
//   goroutine at a function's entry. A stack growth or a recovered panic, whose gogo
//   goes back into the same stack, ends only the frames above where it goes.
// Memory: the frame stack, the trap stack and the parked goroutine stacks (bounded),
// nothing per event.

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/recent_by_address.h"

#include "decoder/flow/flow_event.h"
#include "decoder/model/function_resolver.h"
#include "decoder/output/slice_sink.h"
#include "decoder/stats.h"

namespace ptd::decoder {

class CallStackModel {
 public:
  // Emitted slice depth limit; the frame at this depth is the fold marker.
  static constexpr size_t kFoldDepth = 500;
  // A segment's output is held back (up to this many slice events) while its bottom
  // frame is inferred, so parents inferred later can still be written before everything
  // they enclose, with the segment's start time. Beyond it, later parents begin when
  // they are found.
  static constexpr size_t kMaxHeldEvents = size_t{1} << 16;
  static constexpr char kFoldName[] = "[deeper frames folded]";
  static constexpr char kSyscallName[] = "[syscall]";
  static constexpr char kUntracedName[] = "[untraced]";
  static constexpr char kExecName[] = "exec";
  // Go stacks parked and never resumed on this thread (goroutines that moved to another
  // thread, or ended) are dropped beyond this many, oldest first at their resume PC.
  static constexpr size_t kMaxParkedStacks = size_t{1} << 14;

  CallStackModel(FunctionResolver* resolver, SliceSink* sink, bool has_cycles = false);

  void OnEvent(const FlowEvent& event);
  // Closes every open frame at `time` (end of the thread's trace).
  void Finish(uint64_t time, uint64_t instructions, uint64_t cycles);

  // calls, returns, errors, overflows, lost, segments, tail_calls, unwinds,
  // inferred_frames, folded_frames, max_depth.
  const Stats& stats() const { return stats_; }
  size_t depth() const { return frames_.size(); }
  // The time of the last event, or of the end Finish() gave its frames (if later).
  uint64_t last_time() const { return last_time_; }

 private:
  enum class FrameKind : uint8_t { kFunction, kSyscall, kUntraced };
  // The Go runtime's stack-switching functions, by symbol name (only Go binaries have them).
  enum class GoRole : uint8_t {
    kNone,
    kMcall,      // runtime.mcall: leaves the goroutine's stack for g0's
    kMorestack,  // runtime.morestack: newstack on g0, back to the same goroutine unless
                 // it was preempted there
    kGogo,    // runtime.gogo and its gogo<>: its indirect jump resumes a goroutine
    kExit,    // runtime.goexit1: the goroutine's mcall(goexit0) never resumes it
    kGoexit,  // runtime.goexit: a goroutine's function returns into it (never a caller)
    kGopanic, // runtime.gopanic: its mcall(recovery) resumes a frame of the same stack
  };
  static GoRole GoRoleOf(absl::string_view name);
  struct Frame {
    uint64_t fn_start = 0;
    uint64_t fn_end = 0;
    absl::string_view name;
    const image::SourceFrame* source = nullptr;  // its DWARF subprogram, if known
    uint64_t return_address = 0;  // 0: unknown (inferred or re-entered)
    uint64_t begin_time = 0;
    uint64_t begin_instructions = 0;
    uint64_t begin_cycles = 0;
    FrameKind kind = FrameKind::kFunction;
    GoRole go_role = GoRole::kNone;
    bool emitted = false;       // has (or will have, once begun) a slice
    bool fold_marker = false;   // its slice is the fold marker
    bool begun = false;         // Begin written
    bool plt_pending = false;   // named once the PLT stub jumps on
    bool symbol = false;        // [fn_start, fn_end) is a real symbol's range
    bool inlines = false;       // the function has inlined calls (FunctionRange::inlines)
    uint32_t inline_open = 0;   // its inlined slices open now (the last of open_inlines_)
    // The start of the function's main part: [fn_start, fn_end) may be a part split off
    // it (foo.cold), which is the same function and the same call.
    uint64_t home = 0;
    // Names this frame with every frame below it as they are: new at each push, and
    // whenever the frame's range or the frames below change (AncestorHolding's memo).
    uint64_t serial = 0;
    bool contains(uint64_t a) const { return a >= fn_start && a < fn_end; }
  };

  // A slice event held back: 32 bytes, since a segment fills up to kMaxHeldEvents of
  // them and each page of the buffer costs a page fault when first touched. An End's
  // has_cycles is the model's.
  struct HeldEvent {
    struct Name {
      const char* data;
      size_t size;
    };
    struct Counts {
      uint64_t instructions;
      uint64_t cycles;
    };
    uint64_t time;
    union {
      Name name;      // a Begin's
      Counts counts;  // an End's
    };
    bool begin;
    uint32_t source;  // a Begin's: 1 + its index in held_sources_; 0: none
    static HeldEvent MakeBegin(uint64_t time, absl::string_view name) {
      HeldEvent e;
      e.time = time;
      e.name = {name.data(), name.size()};
      e.begin = true;
      e.source = 0;
      return e;
    }
  };
  static_assert(sizeof(HeldEvent) == 32);
  void EmitBegin(uint64_t time, absl::string_view name, const image::SourceFrame* source = nullptr);
  void EmitEnd(uint64_t time, uint64_t instructions, uint64_t cycles);
  void Release();
  // A frame stack starts at `event` (a segment, or a goroutine's after a switch).
  void BeginStack(const FlowEvent& event, bool bottom_known);
  void StartSegment(const FlowEvent& event, bool bottom_known = false);
  // The thread's process exec'd `program`, which starts at `event` (an enable).
  void OnExec(const FlowEvent& event, uint64_t previous_time, const image::ProgramStart& program);
  void EndSegment(const FlowEvent& event, const char* what);
  static Frame FrameBeginningAt(const FlowEvent& event);  // only the begin_* fields set
  Frame MakeFrame(uint64_t address, bool target_known, const FlowEvent& event);
  // `frame` becomes a frame of `info`'s function (a new frame, or a PLT stub's frame named
  // after where the stub goes).
  static void TakeFunction(Frame& frame, const FunctionInfo& info);
  void Push(const Frame& frame);
  // A "[syscall]" (returns to the syscall's fallthrough) or "[untraced]" frame.
  void PushMarker(FrameKind kind, const FlowEvent& event);
  void Begin(Frame& frame);
  // Inlined frames along the run from the last event to `event` (before it is handled).
  void FollowInlines(const FlowEvent& event);
  // The top frame's inlined slices become those of `innermost`'s chain, at instruction
  // `index` of the run of `count` instructions that `event` ends.
  void SetInlineChain(const image::SourceFrame* innermost, uint64_t index, uint64_t count, const FlowEvent& event);
  void CloseInline(uint64_t time, uint64_t instructions, uint64_t cycles);
  // Where the run after `event` starts.
  void StartRun(const FlowEvent& event);
  void PopTop(const FlowEvent& event);
  void PopMarkers(const FlowEvent& event);
  void InferParent(uint64_t address, const FlowEvent& event);
  void MaterializeTop();
  void UnwindTo(size_t depth, const FlowEvent& event);
  // The innermost frame below the top whose function holds `address` (with
  // `mid_function`, not at its entry), or kNoFrame.
  static constexpr size_t kNoFrame = ~size_t{0};
  size_t AncestorHolding(uint64_t address, bool mid_function);
  // The innermost of frames_[begin, end) that AncestorHolding would take, or kNoFrame.
  size_t ScanForAncestorHolding(size_t begin, size_t end, uint64_t address, bool mid_function) const;
  // `info` is another part of `frame`'s function (foo and foo.cold): the frame goes on in
  // that part's range, with its slice; false when `info` is another function.
  bool MoveWithinFunction(Frame& frame, const FunctionInfo& info);
  // The innermost frame below the top running the function of which `info` is a part, or
  // kNoFrame: where an unwinder lands in a catch block split off to foo.cold.
  size_t AncestorRunning(const FunctionInfo& info) const;
  // The frames below the top changed other than by a push or pop (inserted or removed
  // at the bottom): every frame gets a new serial.
  void RenumberFrames();

  // OnEvent's dispatch, between the inlined frames of the run it ends and the next run.
  void OnEventAfterRun(const FlowEvent& event, uint64_t previous_time);
  // OnEvent only dispatches (every case a call in tail position, so it needs no stack
  // frame of its own): the work of each kind is in these.
  [[gnu::noinline]] void OnSyscall(const FlowEvent& event);
  [[gnu::noinline]] void OnDisable(const FlowEvent& event);  // when no marker is on top
  [[gnu::noinline]] void OnTrap(const FlowEvent& event);  // trap push, trap pop, raise
  void OnCall(const FlowEvent& event);
  void OnReturn(const FlowEvent& event);
  void ReturnFrom(size_t frame, const FlowEvent& event);
  void ContinueAt(const FlowEvent& event);
  void OnJump(const FlowEvent& event);
  // `previous_time`: the time of the event before it.
  void OnEnable(const FlowEvent& event, uint64_t previous_time);
  // A return or enable past the bottom frame: the caller is inferred, or (a goroutine
  // started at its function, whose bottom is known) execution goes on at `address`.
  void ParentAfterBottom(uint64_t address, const FlowEvent& event);

  // Go goroutines: a parked stack and the PC it resumes at.
  struct ParkedStack {
    std::vector<Frame> frames;
    bool bottom_known = false;
    uint64_t order = 0;  // when it was parked (the most recent is searched first)
  };
  // Ends every open frame and starts a new stack (a goroutine's or g0's) at `event`.
  void SwitchStacks(const FlowEvent& event, bool bottom_known);
  // Parks frames_[0, count), to be resumed at `resume_pc` (not when they end in goexit1).
  void Park(uint64_t resume_pc, size_t count);
  void GoPark(uint64_t resume_pc, const FlowEvent& event);
  void GoResume(const FlowEvent& event);
  // runtime.gogo's helper gogo<> (its jump there is a tail call, not a resume).
  bool IsGogoHelper(uint64_t address);
  void Restore(const std::vector<Frame>& frames, size_t count, const FlowEvent& event);
  // A return from resumed frame `i` to an address its parked copy does not return to:
  // switches to another stack parked at the same PC that does. False when none does.
  bool SwapResumedStack(size_t i, const FlowEvent& event);
  // None does: the stack resumed was another goroutine's (this one was parked on another
  // thread, or before the trace): it goes back to the parked ones and frame `i` stays as
  // the bottom of a stack whose callers are inferred.
  void Unresume(size_t i);

  FunctionResolver* resolver_;
  SliceSink* sink_;
  // Inlined slices open, of every frame, in frame order (Frame::inline_open each).
  struct OpenInline {
    const image::SourceFrame* frame = nullptr;
    uint64_t begin_time = 0;
    uint64_t begin_instructions = 0;
    uint64_t begin_cycles = 0;
    bool emitted = false;
  };
  std::vector<OpenInline> open_inlines_;
  size_t emitted_inlines_ = 0;  // of open_inlines_, those with a slice
  std::vector<const image::SourceFrame*> chain_;  // scratch
  // The run since the last event: where it starts (known: run_known_) and the counts
  // before its first instruction.
  bool run_known_ = false;
  uint64_t run_ip_ = 0;
  uint64_t run_time_ = 0;
  uint64_t run_instructions_ = 0;
  uint64_t run_cycles_ = 0;
  bool has_cycles_;
  std::vector<Frame> frames_;
  std::vector<size_t> trap_depths_;
  size_t emitted_on_stack_ = 0;
  bool in_segment_ = false;
  bool raise_pending_ = false;
  size_t raise_depth_ = 0;  // frames left once the pending raise lands
  uint64_t segment_start_time_ = 0;
  uint64_t segment_start_instructions_ = 0;
  uint64_t segment_start_cycles_ = 0;
  uint64_t inferred_in_segment_ = 0;
  std::vector<HeldEvent> held_;
  std::vector<const image::SourceFrame*> held_sources_;  // of held Begins (HeldEvent::source)
  bool holding_ = false;
  uint64_t last_time_ = 0;
  // The exec of the program the last enable ran in (0: none), and whether there was one.
  uint64_t program_exec_ns_ = 0;
  bool enabled_ = false;
  std::string detail_;  // scratch for instant event details
  // Go: the stack's bottom frame has no caller to infer (a goroutine's function, g0's
  // mcall/morestack).
  bool bottom_known_ = false;
  absl::flat_hash_map<uint64_t, std::deque<ParkedStack>> parked_;  // by resume PC, none empty
  size_t parked_count_ = 0;
  uint64_t park_order_ = 0;
  uint64_t last_parked_pc_ = 0;
  // The stack just resumed while others wait at the same PC: which one it is stays open
  // until a return into its frames tells them apart (their Begins are still held).
  struct PendingResume {
    bool active = false;
    uint64_t resume_pc = 0;
    ParkedStack stack;    // as parked
    size_t unchecked = 0; // frames [0, unchecked) of frames_ are its still-unchecked ones
  };
  PendingResume pending_;
  // AncestorHolding's answers for the frames below a multiple of kAncestorBlock, by
  // address, for the frames named by `serial` (the highest of them): the scan would walk
  // the whole stack on every jump out of the top frame's function (a tail call, most
  // often), and deep stacks repeat the same jumps over the same frames (an interpreter's
  // loop under its calls).
  static constexpr size_t kAncestorBlock = 16;
  struct AncestorAnswer {
    uint64_t serial = 0;
    bool mid_function = false;
    size_t frame = kNoFrame;
  };
  RecentByAddress<AncestorAnswer, 256> ancestor_answers_;
  uint64_t last_serial_ = 0;
  Stats stats_;
};

}  // namespace ptd::decoder
