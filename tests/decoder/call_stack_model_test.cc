// The call-stack model on hand-written event sequences, one rule per test.
#include "decoder/model/call_stack_model.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/decoder/recording_sink.h"

namespace ptd::decoder {
namespace {

using ::testing::ElementsAre;
using testing::RecordingSink;

// Functions at 0x1000 * n, each 0x100 long; "plt_*" ones are PLT stubs.
class FakeResolver : public FunctionResolver {
 public:
  void Add(uint64_t start, std::string name, bool plt = false) { functions_[start] = {std::move(name), plt}; }
  // The exec the image says started the program it holds now.
  void Exec(uint64_t exec_ns, std::string program) { program_ = {exec_ns, std::move(program)}; }
  const image::ProgramStart& program_start() override { return program_; }
  FunctionInfo Resolve(uint64_t address) override {
    auto it = functions_.upper_bound(address);
    if (it != functions_.begin()) {
      --it;
      if (address < it->first + 0x100) return FunctionInfo{{it->first, it->first + 0x100, it->second.plt, true, true}, it->second.name};
    }
    unknown_ = "unknown";
    return FunctionInfo{{address, address + 1, false, false, false}, unknown_};
  }

 private:
  struct Fn {
    std::string name;
    bool plt;
  };
  std::map<uint64_t, Fn> functions_;
  std::string unknown_;
  image::ProgramStart program_;
};

// Keeps the time of every End and Instant too.
struct TimedRecordingSink : RecordingSink {
  std::vector<uint64_t> end_times;
  std::vector<std::pair<uint64_t, std::string>> instants;  // time, detail
  void End(uint64_t time, const SliceCounts& counts) override {
    end_times.push_back(time);
    RecordingSink::End(time, counts);
  }
  void Instant(uint64_t time, absl::string_view name, absl::string_view detail) override {
    instants.emplace_back(time, std::string(detail));
    RecordingSink::Instant(time, name, detail);
  }
};

class ModelTest : public ::testing::Test {
 protected:
  ModelTest() : model_(&resolver_, &sink_) {
    resolver_.Add(0x1000, "main");
    resolver_.Add(0x2000, "foo");
    resolver_.Add(0x3000, "bar");
    resolver_.Add(0x4000, "baz");
    resolver_.Add(0x5000, "puts@plt", /*plt=*/true);
    resolver_.Add(0x5100, "[plt]", /*plt=*/true);
    resolver_.Add(0x6000, "puts");
    resolver_.Add(0x7000, "handler");
    resolver_.Add(0x7100, "__restore_rt");
  }
  FlowEvent Ev(FlowKind kind, uint64_t ip, uint64_t target, uint64_t fallthrough = 0) {
    insns_ += 3;
    FlowEvent e;
    e.kind = kind;
    e.ip = ip;
    e.target = target;
    e.fallthrough = fallthrough;
    e.instructions = insns_;
    e.time = insns_;
    return e;
  }
  void Enable(uint64_t at) { model_.OnEvent(Ev(FlowKind::kEnable, 0, at)); }
  void Call(uint64_t ip, uint64_t target) { model_.OnEvent(Ev(FlowKind::kCall, ip, target, ip + 5)); }
  void Ret(uint64_t ip, uint64_t target) { model_.OnEvent(Ev(FlowKind::kReturn, ip, target)); }
  void Jump(uint64_t ip, uint64_t target) { model_.OnEvent(Ev(FlowKind::kJump, ip, target)); }
  void Finish() { model_.Finish(insns_ + 1, insns_ + 1, 0); }
  void ExpectBalanced() {
    EXPECT_EQ(sink_.open(), 0u);
    EXPECT_FALSE(sink_.unbalanced());
    EXPECT_FALSE(sink_.out_of_order());
  }
  // Ends the trace; the slices written, which must nest and be in order.
  std::vector<std::string> FinishBalanced() {
    Finish();
    ExpectBalanced();
    return sink_.Names();
  }

  FakeResolver resolver_;
  TimedRecordingSink sink_;
  CallStackModel model_;
  uint64_t insns_ = 0;
};

TEST_F(ModelTest, CallAndReturnNestWithInclusiveInstructionCounts) {
  Enable(0x1000);         // 3
  Call(0x1010, 0x2000);   // 6
  Ret(0x2050, 0x1015);    // 9
  Finish();               // 10
  EXPECT_THAT(sink_.lines(), ElementsAre("B main", "B foo", "E foo i=3", "E main i=7"));
  ExpectBalanced();
}

TEST_F(ModelTest, JumpIntoAnotherFunctionIsATailCallSibling) {
  Enable(0x1000);
  Call(0x1010, 0x2000);
  Jump(0x2020, 0x2040);  // inside foo: nothing
  Jump(0x2050, 0x3000);  // foo tail-calls bar
  Ret(0x3050, 0x1015);   // bar returns to main (foo's return address)
  Call(0x1020, 0x4000);
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B foo", "E foo", "B bar", "E bar", "B baz", "E baz", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kTailCalls], 1u);
}

// A call that is the last instruction of main (0x10fb + 5 = 0x1100, past main's end):
// when it returns, execution goes on in the next function. The decoder drops jumps
// inside one function, so the model names it at the return, not at a later jump.
TEST_F(ModelTest, ReturnPastTheEndOfTheCallerContinuesInTheNextFunction) {
  resolver_.Add(0x1100, "after_main");
  Enable(0x1000);
  Call(0x10fb, 0x2000);
  Ret(0x2050, 0x1100);
  Call(0x1110, 0x3000);
  EXPECT_THAT(FinishBalanced(),
              ElementsAre("B main", "B foo", "E foo", "E main", "B after_main", "B bar", "E bar", "E after_main"));
}

// Returning into code with no known function keeps the frame returned to.
TEST_F(ModelTest, ReturnPastTheEndIntoUnknownCodeKeepsTheCaller) {
  Enable(0x1000);
  Call(0x10fb, 0x2000);
  Ret(0x2050, 0x1100);
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B foo", "E foo", "E main"));
}

TEST_F(ModelTest, ReturnToDeeperFrameUnwindsEveryFrameAbove) {
  Enable(0x1000);
  Call(0x1010, 0x2000);  // main → foo (ret 0x1015)
  Call(0x2010, 0x3000);  // foo → bar (ret 0x2015)
  Call(0x3010, 0x4000);  // bar → baz (ret 0x3015)
  Ret(0x4050, 0x1015);   // longjmp-like: back in main
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B foo", "B bar", "B baz", "E baz", "E bar", "E foo", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kUnwinds], 1u);
}

TEST_F(ModelTest, PltCallIsOneSliceNamedAfterTheTarget) {
  Enable(0x1000);
  Call(0x1010, 0x5000);  // call puts@plt
  Jump(0x5000, 0x5100);  // lazy binding: into PLT0
  Jump(0x5100, 0x6000);  // … and on to puts
  Ret(0x6050, 0x1015);
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B puts", "E puts", "E main"));
}

TEST_F(ModelTest, MidStackStartInfersParentsFromReturns) {
  Enable(0x3020);         // trace starts inside bar
  Ret(0x3050, 0x2015);    // bar returns into foo: foo inferred
  Ret(0x2050, 0x1015);    // foo returns into main: main inferred
  Call(0x1020, 0x4000);
  // Parents are written before what they enclose, so the output nests properly.
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B foo", "B bar", "E bar", "E foo", "B baz", "E baz", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kInferredFrames], 3u);
}

TEST_F(ModelTest, InferredParentsBeginBeforeTheirChildren) {
  // Begin times: the inferred parents' must precede the first frame's.
  struct TimedSink : RecordingSink {
    std::vector<std::pair<std::string, uint64_t>> begins;
    void Begin(uint64_t time, absl::string_view name) override {
      begins.emplace_back(std::string(name), time);
      RecordingSink::Begin(time, name);
    }
  } sink;
  CallStackModel model(&resolver_, &sink);
  FlowEvent e = Ev(FlowKind::kEnable, 0, 0x3020);
  model.OnEvent(e);
  model.OnEvent(Ev(FlowKind::kReturn, 0x3050, 0x2015));
  model.OnEvent(Ev(FlowKind::kReturn, 0x2050, 0x1015));
  model.Finish(insns_ + 1, insns_ + 1, 0);
  ASSERT_EQ(sink.begins.size(), 3u);
  EXPECT_EQ(sink.begins[0].first, "main");
  EXPECT_EQ(sink.begins[1].first, "foo");
  EXPECT_EQ(sink.begins[2].first, "bar");
  // All begin where the segment (the trace) begins, outermost first.
  EXPECT_EQ(sink.begins[0].second, e.time);
  EXPECT_EQ(sink.begins[1].second, e.time);
  EXPECT_EQ(sink.begins[2].second, e.time);
  EXPECT_FALSE(sink.out_of_order());
}

TEST_F(ModelTest, SyscallIsAChildUntilTracingResumes) {
  Enable(0x1000);
  model_.OnEvent(Ev(FlowKind::kSyscall, 0x1010, 0, 0x1012));
  model_.OnEvent(Ev(FlowKind::kDisable, 0, 0));
  Enable(0x1012);
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B [syscall]", "E [syscall]", "E main"));
}

// main calls foo (execve), whose syscall replaces the program: the new one (entry bar)
// starts when tracing resumes, with the exec's time between the syscall and the enable.
class ExecTest : public ModelTest {
 protected:
  // On the time axis, an enable carries the time of its own timing packets.
  void EnableWithTime(uint64_t at) {
    FlowEvent e = Ev(FlowKind::kEnable, 0, at);
    e.enable_time = e.time;
    model_.OnEvent(e);
  }
  void Syscall(uint64_t ip) { model_.OnEvent(Ev(FlowKind::kSyscall, ip, 0, ip + 2)); }
  void Disable() { model_.OnEvent(Ev(FlowKind::kDisable, 0, 0)); }
};

TEST_F(ExecTest, ExecEndsTheOldProgramsFramesAtTheExecAndStartsTheNewOneFromAnEmptyStack) {
  EnableWithTime(0x1000);
  model_.OnEvent(Ev(FlowKind::kCall, 0x1010, 0x2000, 0x1015));
  Syscall(0x2010);
  Disable();
  const uint64_t exec_time = insns_ + 1;
  resolver_.Exec(exec_time, "echo");
  EnableWithTime(0x3000);
  model_.OnEvent(Ev(FlowKind::kCall, 0x3010, 0x4000, 0x3015));
  model_.Finish(insns_ + 1, insns_ + 1, 0);
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B [syscall]", "E [syscall]", "E foo", "E main", "I exec",
                                         "B bar", "B baz", "E baz", "E bar"));
  EXPECT_EQ(sink_.open(), 0u);
  EXPECT_FALSE(sink_.unbalanced());
  EXPECT_FALSE(sink_.out_of_order());
  // Every frame of the old program ends at the exec, which names the new program.
  ASSERT_EQ(sink_.end_times.size(), 5u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(sink_.end_times[i], exec_time) << i;
  ASSERT_EQ(sink_.instants.size(), 1u);
  EXPECT_EQ(sink_.instants[0], std::make_pair(exec_time, std::string("echo")));
  EXPECT_EQ(model_.stats()[Stat::kSegments], 2u);
  EXPECT_EQ(model_.stats()[Stat::kInferredFrames], 1u);  // the first program's main only
}

// Without timing packets of its own the enable's time is not the exec's clock: the old
// program ends where the new one starts.
TEST_F(ExecTest, OnAnotherAxisTheOldProgramEndsWhereTheNewOneStarts) {
  Enable(0x1000);
  Syscall(0x1010);
  Disable();
  resolver_.Exec(1, "echo");
  Enable(0x3000);
  const uint64_t new_program_start = insns_;
  model_.Finish(insns_ + 1, insns_ + 1, 0);
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B [syscall]", "E [syscall]", "E main", "I exec", "B bar", "E bar"));
  ASSERT_EQ(sink_.end_times.size(), 3u);
  EXPECT_EQ(sink_.end_times[0], new_program_start);
  EXPECT_EQ(sink_.end_times[1], new_program_start);
}

// A thread whose trace begins in a program an exec started (or a rebuilt image showing
// the same exec again) has no old program to end.
TEST_F(ExecTest, AnExecBeforeTheThreadsFirstEnableOrSeenAgainEndsNothing) {
  resolver_.Exec(1, "echo");
  EnableWithTime(0x3000);
  Syscall(0x3010);
  Disable();
  resolver_.Exec(0, "");  // the image rebuilt from the start
  EnableWithTime(0x3012);
  Syscall(0x3020);
  Disable();
  resolver_.Exec(1, "echo");
  EnableWithTime(0x3022);
  model_.Finish(insns_ + 1, insns_ + 1, 0);
  EXPECT_THAT(sink_.Names(), ElementsAre("B bar", "B [syscall]", "E [syscall]", "B [syscall]", "E [syscall]", "E bar"));
}

// A failed execve returns to the program that called it.
TEST_F(ExecTest, AFailedExecReturnsIntoTheSameProgram) {
  EnableWithTime(0x1000);
  model_.OnEvent(Ev(FlowKind::kCall, 0x1010, 0x2000, 0x1015));
  Syscall(0x2010);
  Disable();
  EnableWithTime(0x2012);
  model_.OnEvent(Ev(FlowKind::kReturn, 0x2020, 0x1015));
  model_.Finish(insns_ + 1, insns_ + 1, 0);
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B [syscall]", "E [syscall]", "E foo", "E main"));
}

TEST_F(ModelTest, OtherDisabledRegionsAreUntraced) {
  Enable(0x1000);
  Call(0x1010, 0x2000);
  model_.OnEvent(Ev(FlowKind::kDisable, 0, 0));  // e.g. left the filter range
  Enable(0x1015);  // back at foo's return address: foo returned while untraced
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B foo", "B [untraced]", "E [untraced]", "E foo", "E main"));
}

TEST_F(ModelTest, SignalHandlerIsAFrameUntilSigreturn) {
  Enable(0x1000);
  Call(0x1010, 0x2000);                          // main → foo
  model_.OnEvent(Ev(FlowKind::kDisable, 0, 0));  // interrupted in foo
  Enable(0x7000);                                // kernel delivers the signal: handler
  Ret(0x7050, 0x7100);                           // handler returns to the restorer
  model_.OnEvent(Ev(FlowKind::kSyscall, 0x7110, 0, 0x7112));  // rt_sigreturn
  model_.OnEvent(Ev(FlowKind::kDisable, 0, 0));
  Enable(0x2030);                                // back where foo was interrupted
  Ret(0x2050, 0x1015);
  EXPECT_THAT(FinishBalanced(),
              ElementsAre("B main", "B foo", "B [untraced]", "E [untraced]", "B handler", "E handler",
                          "B __restore_rt", "B [syscall]", "E [syscall]", "E __restore_rt", "E foo", "E main"));
}

TEST_F(ModelTest, JumpIntoTheMiddleOfAnAncestorUnwindsToIt) {
  Enable(0x1000);
  Call(0x1010, 0x2000);  // main → foo
  Call(0x2010, 0x3000);  // foo → bar
  Call(0x3010, 0x4000);  // bar → baz (__longjmp)
  Jump(0x4020, 0x1018);  // jmp *%rdx: back after main's setjmp call
  Call(0x1030, 0x2000);  // main calls foo again: a child of main, not of baz
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B foo", "B bar", "B baz", "E baz", "E bar", "E foo",
                                         "B foo", "E foo", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kTailCalls], 0u);
  EXPECT_EQ(model_.stats()[Stat::kUnwinds], 1u);
}

// Under a deep stack the model keeps its answer for the frames far below the top: the
// same jump at the same depth must still find an ancestor once those frames changed.
TEST_F(ModelTest, JumpIntoAnAncestorFarBelowTheTopFollowsTheFramesThere) {
  auto recurse_to_depth = [&](size_t depth) {
    while (model_.depth() < depth) Call(0x2010, 0x2000);  // foo → foo
  };
  Enable(0x1000);
  Call(0x1010, 0x2000);  // main → foo
  recurse_to_depth(40);
  Jump(0x2020, 0x4020);  // into baz's middle, which is on no frame: a tail call
  EXPECT_EQ(model_.stats()[Stat::kTailCalls], 1u);
  Ret(0x4050, 0x1015);   // back in main
  ASSERT_EQ(model_.depth(), 1u);
  Call(0x1020, 0x4000);  // main → baz, now the frame above main
  Call(0x4010, 0x2000);  // baz → foo
  recurse_to_depth(40);
  const uint64_t unwinds = model_.stats()[Stat::kUnwinds];
  Jump(0x2020, 0x4020);  // the same jump at the same depth: back into baz (longjmp-like)
  EXPECT_EQ(model_.stats()[Stat::kTailCalls], 1u);
  EXPECT_EQ(model_.stats()[Stat::kUnwinds], unwinds + 1);
  EXPECT_EQ(model_.depth(), 2u);
  Ret(0x4050, 0x1025);  // baz returns to main
  EXPECT_EQ(model_.depth(), 1u);
  Finish();
  ExpectBalanced();
}

TEST_F(ModelTest, JumpToAnAncestorsEntryIsStillATailCall) {
  Enable(0x1000);
  Call(0x1010, 0x2000);  // main → foo
  Call(0x2010, 0x3000);  // foo → bar
  Jump(0x3020, 0x2000);  // bar tail-calls foo (recursion through a sibling call)
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B bar", "E bar", "B foo", "E foo", "E foo", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kTailCalls], 1u);
}

TEST_F(ModelTest, ReturnIntoTheMiddleOfAnAncestorUnwindsToIt) {
  Enable(0x1000);
  Call(0x1010, 0x2000);  // main → foo (throws)
  Call(0x2010, 0x3000);  // foo → bar (_Unwind_RaiseException)
  Call(0x3010, 0x4000);  // bar → baz
  Ret(0x4050, 0x1040);   // the unwinder's ret lands on main's landing pad
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B foo", "B bar", "B baz", "E baz", "E bar", "E foo", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kUnwinds], 1u);
}

TEST_F(ModelTest, RaiseInsideARecursiveFunctionUnwindsToTheTrapsCall) {
  Enable(0x1000);
  Call(0x1010, 0x2000);                               // main → foo(2)
  Call(0x2010, 0x2000);                               // foo(2) → foo(1)
  model_.OnEvent(Ev(FlowKind::kTrapPush, 0x2020, 0));  // try in foo(1)
  Call(0x2030, 0x2000);                               // foo(1) → foo(0)
  model_.OnEvent(Ev(FlowKind::kRaise, 0x2040, 0));     // foo(0) raises
  Jump(0x2044, 0x2080);                               // into foo(1)'s handler (same function)
  Ret(0x2090, 0x2015);                                // foo(1) returns to foo(2)
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B foo", "B foo", "B foo", "E foo", "E foo", "E foo", "E main"));
  // foo(0) ends at the handler's entry, foo(1) at its own return.
  EXPECT_EQ(sink_.lines()[4], "E foo i=6");
}

TEST_F(ModelTest, OcamlRaiseUnwindsToTheInnermostTrapDepth) {
  Enable(0x1000);
  Call(0x1010, 0x2000);                               // main → foo
  model_.OnEvent(Ev(FlowKind::kTrapPush, 0x2010, 0));  // try in foo (depth 2)
  Call(0x2020, 0x3000);                               // foo → bar
  Call(0x3010, 0x4000);                               // bar → baz
  model_.OnEvent(Ev(FlowKind::kRaise, 0x4020, 0));     // raise in baz
  Jump(0x4024, 0x2080);                               // jmp *%r11 into foo's handler
  Ret(0x2090, 0x1015);                                // foo returns normally
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B foo", "B bar", "B baz", "E baz", "E bar", "E foo", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kTailCalls], 0u);
}

TEST_F(ModelTest, PoppedTrapIsNotUsedByALaterRaise) {
  Enable(0x1000);
  Call(0x1010, 0x2000);                               // main → foo
  model_.OnEvent(Ev(FlowKind::kTrapPush, 0x1008, 0));  // (pretend) try at depth 2
  model_.OnEvent(Ev(FlowKind::kTrapPop, 0x1009, 0));
  Call(0x2010, 0x3000);
  model_.OnEvent(Ev(FlowKind::kRaise, 0x3020, 0));     // no trap left: nothing unwound here
  Ret(0x3024, 0x2015);                                // caml_raise_exn's ret enters a handler
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B bar", "E bar", "E foo", "E main"));
}

TEST_F(ModelTest, DecodeErrorClosesEveryFrameAndStartsANewSegment) {
  Enable(0x1000);
  Call(0x1010, 0x2000);
  FlowEvent error = Ev(FlowKind::kError, 0, 0);
  error.message = "no memory mapped at this address";
  error.offset = 0x1234;
  model_.OnEvent(error);
  Call(0x2020, 0x3000);  // ignored: not synchronized
  Enable(0x3000);
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B foo", "E foo", "E main", "I decode error", "B bar", "E bar"));
  EXPECT_EQ(model_.stats()[Stat::kSegments], 2u);
  EXPECT_EQ(model_.stats()[Stat::kErrors], 1u);
}

TEST_F(ModelTest, OverflowAndLostDataAreMarked) {
  Enable(0x1000);
  model_.OnEvent(Ev(FlowKind::kOverflow, 0, 0));
  Enable(0x2000);
  model_.OnEvent(Ev(FlowKind::kLostData, 0, 0));
  Enable(0x3000);
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "E main", "I trace overflow", "B foo", "E foo", "I lost trace data",
                                         "B bar", "E bar"));
}

TEST_F(ModelTest, DeepRecursionIsFoldedBelowPerfettosDepthLimit) {
  Enable(0x2000);
  const int kDepth = 700;
  for (int i = 0; i < kDepth; ++i) Call(0x2010, 0x2000);
  for (int i = 0; i < kDepth; ++i) Ret(0x2050, 0x2015);
  Finish();
  EXPECT_LE(sink_.max_depth(), 512u);
  EXPECT_EQ(sink_.max_depth(), CallStackModel::kFoldDepth + 1);
  int folded = 0;
  for (const std::string& name : sink_.Names()) folded += name == "B [deeper frames folded]";
  EXPECT_EQ(folded, 1);
  EXPECT_EQ(model_.stats()[Stat::kFoldedFrames], static_cast<uint64_t>(kDepth + 1 - CallStackModel::kFoldDepth - 1));
  ExpectBalanced();
}

TEST_F(ModelTest, CallbackFromUntracedCodeIsAChildOfTheCaller) {
  Enable(0x1000);
  Call(0x1010, 0x9000);                          // call into untraced library (qsort)
  model_.OnEvent(Ev(FlowKind::kDisable, 0, 0));
  Enable(0x3000);                                // it calls back into bar
  FlowEvent ret = Ev(FlowKind::kReturn, 0x3050, 0);
  ret.target_known = false;                      // bar returns into untraced code
  model_.OnEvent(ret);
  model_.OnEvent(Ev(FlowKind::kDisable, 0, 0));
  Enable(0x1015);                                // qsort returns to main
  EXPECT_THAT(FinishBalanced(), ElementsAre("B main", "B unknown", "B [untraced]", "E [untraced]", "B bar", "E bar",
                                         "B [untraced]", "E [untraced]", "E unknown", "E main"));
}

// Go: the runtime's stack switches, with the symbol names of a Go 1.19 binary.
class GoModelTest : public ModelTest {
 protected:
  static constexpr uint64_t kMcall = 0x10000, kGogo = 0x11000, kGogoHelper = 0x12000, kMorestack = 0x13000,
                            kMorestackNoctxt = 0x14000, kGoexit = 0x15000, kGoexit1 = 0x16000, kParkM = 0x17000,
                            kGopark = 0x18000, kA = 0x19000, kB = 0x1a000, kNewstack = 0x1b000, kGopanic = 0x1c000,
                            kC = 0x1d000, kAsyncPreempt = 0x1e000, kAsyncPreempt2 = 0x1f000, kSystemstack = 0x20000;
  // Where a goroutine parked by gopark resumes: the return address of gopark's mcall.
  static constexpr uint64_t kGoparkResume = kGopark + 0x15;
  GoModelTest() {
    resolver_.Add(kMcall, "runtime.mcall");
    resolver_.Add(kGogo, "runtime.gogo.abi0");
    resolver_.Add(kGogoHelper, "gogo");
    resolver_.Add(kMorestack, "runtime.morestack.abi0");
    resolver_.Add(kMorestackNoctxt, "runtime.morestack_noctxt.abi0");
    resolver_.Add(kGoexit, "runtime.goexit.abi0");
    resolver_.Add(kGoexit1, "runtime.goexit1");
    resolver_.Add(kParkM, "runtime.park_m");
    resolver_.Add(kGopark, "runtime.gopark");
    resolver_.Add(kA, "main.a");
    resolver_.Add(kB, "main.b");
    resolver_.Add(kNewstack, "runtime.newstack");
    resolver_.Add(kGopanic, "runtime.gopanic");
    resolver_.Add(kC, "main.c");
    resolver_.Add(kAsyncPreempt, "runtime.asyncPreempt.abi0");
    resolver_.Add(kAsyncPreempt2, "runtime.asyncPreempt2");
    resolver_.Add(kSystemstack, "runtime.systemstack.abi0");
  }
  // The goroutine running `fn` parks in gopark (called from fn + 0x10).
  void Park(uint64_t fn) {
    Call(fn + 0x10, kGopark);
    Call(kGopark + 0x10, kMcall);  // mcall(park_m): on to g0's stack
    Call(kMcall + 0x10, kParkM);
  }
  // g0 (in park_m) runs gogo, which jumps to `pc`.
  void Gogo(uint64_t pc) {
    Call(kParkM + 0x20, kGogo);
    Jump(kGogo + 0x10, kGogoHelper);  // runtime.gogo → gogo<>: a tail call
    Jump(kGogoHelper + 0x20, pc);     // JMP BX: the switch
  }
  // main.a calls main.b, whose prologue finds the stack too small: morestack_noctxt →
  // morestack → newstack → gogo, whose jump is the test's.
  void GrowStackInB() {
    Enable(kA);
    Call(kA + 0x10, kB);
    Call(kB + 0x80, kMorestackNoctxt);
    Jump(kMorestackNoctxt + 0x10, kMorestack);
    Call(kMorestack + 0x10, kNewstack);
    Call(kNewstack + 0x10, kGogo);
    Jump(kGogo + 0x10, kGogoHelper);
  }
  // Its slices up to gogo's jump (newstack's frames nest above b's: not a switch yet).
  static std::vector<std::string> GrowthInB() {
    return {"B main.a", "B main.b", "B runtime.morestack_noctxt.abi0", "E runtime.morestack_noctxt.abi0",
            "B runtime.morestack.abi0", "B runtime.newstack", "B runtime.gogo.abi0", "E runtime.gogo.abi0",
            "B gogo", "E gogo", "E runtime.newstack", "E runtime.morestack.abi0"};
  }
  std::vector<std::string> G0(bool entered_by_mcall = true) {
    std::vector<std::string> out;
    if (entered_by_mcall) out.push_back("B runtime.mcall");
    for (const char* s : {"B runtime.park_m", "B runtime.gogo.abi0", "E runtime.gogo.abi0", "B gogo", "E gogo",
                          "E runtime.park_m"}) {
      out.push_back(s);
    }
    if (entered_by_mcall) out.push_back("E runtime.mcall");
    return out;
  }
  static std::vector<std::string> Cat(std::vector<std::vector<std::string>> parts) {
    std::vector<std::string> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  }
};

// A goroutine that parks (gopark → mcall) leaves its frames; the next goroutine (started
// by gogo at its function's entry) is not nested in them; gogo to the parking PC resumes
// the parked frames where they were.
TEST_F(GoModelTest, McallParksTheGoroutineAndGogoResumesItsFrames) {
  Enable(kA);
  Park(kA);
  Gogo(kB);  // a new goroutine
  Park(kB);
  Gogo(kGoparkResume);   // FIFO: a's stack
  Ret(kGopark + 0x50, kA + 0x15);  // gopark returns into a: confirmed
  Finish();
  EXPECT_EQ(sink_.Names(),
            Cat({{"B main.a", "B runtime.gopark", "E runtime.gopark", "E main.a"}, G0(),
                 {"B main.b", "B runtime.gopark", "E runtime.gopark", "E main.b"}, G0(),
                 {"B main.a", "B runtime.gopark", "E runtime.gopark", "E main.a"}}));
  EXPECT_EQ(model_.stats()[Stat::kGoroutinesStarted], 1u);
  EXPECT_EQ(model_.stats()[Stat::kGoroutineSwitches], 4u);
  EXPECT_EQ(model_.stats()[Stat::kGoroutineSwaps], 0u);
  ExpectBalanced();
}

// Two goroutines parked at the same PC: FIFO picks a's stack, but gopark returns to b's
// call site, so the resumed goroutine is b (the held Begins are renamed); a stays parked
// and is resumed next.
TEST_F(GoModelTest, ReturnsCorrectTheFifoChoiceAmongStacksParkedAtOnePc) {
  Enable(kA);
  Park(kA);
  Gogo(kB);
  Park(kB);
  Gogo(kGoparkResume);
  Ret(kGopark + 0x50, kB + 0x15);  // b's return address: it is b that resumed
  Call(kB + 0x30, kC);
  Ret(kC + 0x50, kB + 0x35);
  Park(kB);
  Gogo(kGoparkResume);  // a (first in), then b: a's
  Ret(kGopark + 0x50, kA + 0x15);
  Finish();
  EXPECT_EQ(sink_.Names(),
            Cat({{"B main.a", "B runtime.gopark", "E runtime.gopark", "E main.a"}, G0(),
                 {"B main.b", "B runtime.gopark", "E runtime.gopark", "E main.b"}, G0(),
                 {"B main.b", "B runtime.gopark", "E runtime.gopark", "B main.c", "E main.c", "B runtime.gopark",
                  "E runtime.gopark", "E main.b"},
                 G0(), {"B main.a", "B runtime.gopark", "E runtime.gopark", "E main.a"}}));
  EXPECT_EQ(model_.stats()[Stat::kGoroutineSwaps], 1u);
  ExpectBalanced();
}

// A return that fits no stack parked at the PC (the goroutine parked on another thread,
// or before the trace began): the stack chosen goes back, and the resumed goroutine's
// callers are inferred from the resume on.
TEST_F(GoModelTest, ResumeThatFitsNoParkedStackInfersTheCallers) {
  Enable(kA);
  Park(kA);
  Gogo(kGoparkResume);
  Ret(kGopark + 0x50, kC + 0x15);  // into main.c: not a's goroutine
  Park(kC);
  Gogo(kGoparkResume);             // a's stack is still parked
  Ret(kGopark + 0x50, kA + 0x15);
  Finish();
  EXPECT_EQ(sink_.Names(),
            Cat({{"B main.a", "B runtime.gopark", "E runtime.gopark", "E main.a"}, G0(),
                 {"B main.c", "B runtime.gopark", "E runtime.gopark", "B runtime.gopark", "E runtime.gopark",
                  "E main.c"},
                 G0(), {"B main.a", "B runtime.gopark", "E runtime.gopark", "E main.a"}}));
  EXPECT_EQ(model_.stats()[Stat::kGoroutinesUnknown], 1u);
  ExpectBalanced();
}

// morestack_noctxt → morestack runs newstack on g0, whose gogo goes back into the
// function that grew its stack (at the return address of its call to morestack_noctxt):
// no switch, the frames stay whole.
TEST_F(GoModelTest, MorestackGrowthReturnsIntoTheSameFrames) {
  GrowStackInB();
  Jump(kGogoHelper + 0x20, kB + 0x85);  // back into b
  Ret(kB + 0x50, kA + 0x15);
  Finish();
  EXPECT_EQ(sink_.Names(), Cat({GrowthInB(), {"E main.b", "E main.a"}}));
  EXPECT_EQ(model_.stats()[Stat::kGoroutineSwitches], 0u);
  ExpectBalanced();
}

// newstack preempted the goroutine (gopreempt_m → schedule): gogo goes to another
// goroutine, so the frames below morestack are parked then, under the PC where b called
// morestack_noctxt, and resumed there later.
TEST_F(GoModelTest, MorestackThatPreemptsParksTheGoroutine) {
  GrowStackInB();
  Jump(kGogoHelper + 0x20, kC);  // another goroutine, new
  Park(kC);
  Gogo(kB + 0x85);               // b's goroutine again
  Ret(kB + 0x50, kA + 0x15);
  Finish();
  EXPECT_EQ(sink_.Names(), Cat({GrowthInB(),
                                {"E main.b", "E main.a", "B main.c", "B runtime.gopark", "E runtime.gopark", "E main.c"},
                                G0(), {"B main.a", "B main.b", "E main.b", "E main.a"}}));
  EXPECT_EQ(model_.stats()[Stat::kGoroutinesStarted], 1u);
  EXPECT_EQ(model_.stats()[Stat::kGoroutinesUnknown], 0u);
  ExpectBalanced();
}

// A goroutine's function returns into goexit, which did not call it (no parent is
// inferred), and goexit1's mcall(goexit0) parks nothing: a later gogo there is unknown.
TEST_F(GoModelTest, GoroutineEndsInGoexitAndIsNotParked) {
  Enable(kParkM);
  Gogo(kB);
  Ret(kB + 0x50, kGoexit + 1);
  Call(kGoexit + 1, kGoexit1);
  Call(kGoexit1 + 0x10, kMcall);
  Call(kMcall + 0x10, kParkM);
  Gogo(kGoexit1 + 0x15);
  Finish();
  EXPECT_EQ(sink_.Names(),
            Cat({G0(false),
                 {"B main.b", "E main.b", "B runtime.goexit.abi0", "B runtime.goexit1", "E runtime.goexit1",
                  "E runtime.goexit.abi0"},
                 G0(), {"B runtime.goexit1", "E runtime.goexit1"}}));
  EXPECT_EQ(model_.stats()[Stat::kGoroutinesStarted], 1u);
  EXPECT_EQ(model_.stats()[Stat::kGoroutinesUnknown], 1u);
  ExpectBalanced();
}

// A recovered panic: gopanic's mcall(recovery) runs recovery on g0, whose gogo jumps
// into the middle of the deferring function: the frames above it (the panicking ones and
// g0's) end there, the deferring frame goes on whole.
TEST_F(GoModelTest, RecoveredPanicContinuesTheDeferringFrame) {
  Enable(kA);
  Call(kA + 0x10, kC);
  Call(kC + 0x10, kGopanic);
  Call(kGopanic + 0x10, kMcall);
  Call(kMcall + 0x10, kParkM);  // recovery
  Gogo(kA + 0x40);
  Call(kA + 0x60, kB);
  Ret(kB + 0x50, kA + 0x65);
  Finish();
  EXPECT_THAT(sink_.Names(),
              ElementsAre("B main.a", "B main.c", "B runtime.gopanic", "B runtime.mcall", "B runtime.park_m",
                          "B runtime.gogo.abi0", "E runtime.gogo.abi0", "B gogo", "E gogo", "E runtime.park_m",
                          "E runtime.mcall", "E runtime.gopanic", "E main.c", "B main.b", "E main.b", "E main.a"));
  EXPECT_EQ(model_.stats()[Stat::kGoroutineSwitches], 0u);
  EXPECT_EQ(model_.stats()[Stat::kGoroutinesUnknown], 0u);
  ExpectBalanced();
}

// The same when mcall(recovery) comes from a function the model does not know as
// gopanic's: the stack was parked, and gogo into the middle of one of its frames (the
// stack parked just before) resumes it up to that frame.
TEST_F(GoModelTest, RecoveryFromAnotherCallerResumesTheStackParkedJustBefore) {
  Enable(kA);
  Call(kA + 0x10, kC);
  Call(kC + 0x10, kMcall);  // main.c stands for an unknown panicking function
  Call(kMcall + 0x10, kParkM);
  Gogo(kA + 0x40);
  Call(kA + 0x60, kB);
  Ret(kB + 0x50, kA + 0x65);
  Finish();
  EXPECT_EQ(sink_.Names(), Cat({{"B main.a", "B main.c", "E main.c", "E main.a"}, G0(),
                                {"B main.a", "B main.b", "E main.b", "E main.a"}}));
  EXPECT_EQ(model_.stats()[Stat::kGoroutinesUnknown], 0u);
  ExpectBalanced();
}

// Goroutines parked on this thread and never resumed here (they moved to another thread)
// are bounded: beyond kMaxParkedStacks the oldest at the PC is dropped, and the newest
// still resumes.
TEST_F(GoModelTest, ParkedStacksAreBounded) {
  Enable(kParkM);
  for (size_t n = 0; n <= CallStackModel::kMaxParkedStacks; ++n) {
    Gogo(n % 2 ? kA : kB);  // a new goroutine
    Park(n % 2 ? kA : kB);
  }
  EXPECT_EQ(model_.stats()[Stat::kGoroutineStacksDropped], 1u);
  Gogo(kGoparkResume);
  Finish();
  EXPECT_EQ(model_.stats()[Stat::kGoroutinesUnknown], 0u);
  ExpectBalanced();
}

// Asynchronous preemption: the signal's return enters asyncPreempt (a frame entered, not
// called), asyncPreempt2 parks with mcall; resumed, asyncPreempt returns into the middle
// of the interrupted function. The parked stack is the one resumed (none is left parked).
TEST_F(GoModelTest, AsyncPreemptParksAndReturnsIntoTheInterruptedFunction) {
  Enable(kA);
  model_.OnEvent(Ev(FlowKind::kDisable, 0, 0));  // the signal
  Enable(kAsyncPreempt);                         // sigreturn to the injected call
  Call(kAsyncPreempt + 0x10, kAsyncPreempt2);
  Call(kAsyncPreempt2 + 0x10, kMcall);  // mcall(gopreempt_m)
  Call(kMcall + 0x10, kParkM);
  Gogo(kAsyncPreempt2 + 0x15);
  Ret(kAsyncPreempt2 + 0x50, kAsyncPreempt + 0x15);
  Ret(kAsyncPreempt + 0x50, kA + 0x33);  // back in the spinning loop
  Call(kA + 0x40, kB);
  Ret(kB + 0x50, kA + 0x45);
  Finish();
  EXPECT_EQ(sink_.Names(),
            Cat({{"B main.a", "B [untraced]", "E [untraced]", "B runtime.asyncPreempt.abi0", "B runtime.asyncPreempt2",
                  "E runtime.asyncPreempt2", "E runtime.asyncPreempt.abi0", "E main.a"},
                 G0(),
                 {"B main.a", "B runtime.asyncPreempt.abi0", "B runtime.asyncPreempt2", "E runtime.asyncPreempt2",
                  "E runtime.asyncPreempt.abi0", "B main.b", "E main.b", "E main.a"}}));
  EXPECT_EQ(model_.stats()[Stat::kGoroutinesUnknown], 0u);
  ExpectBalanced();
}

// systemstack runs its function on g0 and returns to the same goroutine: a call and a
// return, no switch.
TEST_F(GoModelTest, SystemstackIsACallNotASwitch) {
  Enable(kA);
  Call(kA + 0x10, kSystemstack);
  Call(kSystemstack + 0x10, kC);  // the function, on g0's stack
  Ret(kC + 0x50, kSystemstack + 0x15);
  Ret(kSystemstack + 0x50, kA + 0x15);
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main.a", "B runtime.systemstack.abi0", "B main.c", "E main.c",
                                         "E runtime.systemstack.abi0", "E main.a"));
  EXPECT_EQ(model_.stats()[Stat::kGoroutineSwitches], 0u);
  ExpectBalanced();
}

}  // namespace
}  // namespace ptd::decoder
