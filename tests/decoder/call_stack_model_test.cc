// The call-stack model on hand-written event sequences, one rule per test.
#include "decoder/call_stack_model.h"

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
  FunctionInfo Resolve(uint64_t address) override {
    auto it = functions_.upper_bound(address);
    if (it != functions_.begin()) {
      --it;
      if (address < it->first + 0x100) return FunctionInfo{it->first, it->first + 0x100, it->second.name, it->second.plt, true, true};
    }
    unknown_ = "unknown";
    return FunctionInfo{address, address + 1, unknown_, false, false, false};
  }

 private:
  struct Fn {
    std::string name;
    bool plt;
  };
  std::map<uint64_t, Fn> functions_;
  std::string unknown_;
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

  FakeResolver resolver_;
  RecordingSink sink_;
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
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "E foo", "B bar", "E bar", "B baz", "E baz", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kTailCalls], 1u);
  ExpectBalanced();
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
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "E foo", "E main", "B after_main", "B bar", "E bar",
                                         "E after_main"));
  ExpectBalanced();
}

// Returning into code with no known function keeps the frame returned to.
TEST_F(ModelTest, ReturnPastTheEndIntoUnknownCodeKeepsTheCaller) {
  Enable(0x1000);
  Call(0x10fb, 0x2000);
  Ret(0x2050, 0x1100);
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "E foo", "E main"));
  ExpectBalanced();
}

TEST_F(ModelTest, ReturnToDeeperFrameUnwindsEveryFrameAbove) {
  Enable(0x1000);
  Call(0x1010, 0x2000);  // main → foo (ret 0x1015)
  Call(0x2010, 0x3000);  // foo → bar (ret 0x2015)
  Call(0x3010, 0x4000);  // bar → baz (ret 0x3015)
  Ret(0x4050, 0x1015);   // longjmp-like: back in main
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B bar", "B baz", "E baz", "E bar", "E foo", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kUnwinds], 1u);
  ExpectBalanced();
}

TEST_F(ModelTest, PltCallIsOneSliceNamedAfterTheTarget) {
  Enable(0x1000);
  Call(0x1010, 0x5000);  // call puts@plt
  Jump(0x5000, 0x5100);  // lazy binding: into PLT0
  Jump(0x5100, 0x6000);  // … and on to puts
  Ret(0x6050, 0x1015);
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B puts", "E puts", "E main"));
  ExpectBalanced();
}

TEST_F(ModelTest, MidStackStartInfersParentsFromReturns) {
  Enable(0x3020);         // trace starts inside bar
  Ret(0x3050, 0x2015);    // bar returns into foo: foo inferred
  Ret(0x2050, 0x1015);    // foo returns into main: main inferred
  Call(0x1020, 0x4000);
  Finish();
  // Parents are written before what they enclose, so the output nests properly.
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B bar", "E bar", "E foo", "B baz", "E baz", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kInferredFrames], 3u);
  ExpectBalanced();
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
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B [syscall]", "E [syscall]", "E main"));
  ExpectBalanced();
}

TEST_F(ModelTest, OtherDisabledRegionsAreUntraced) {
  Enable(0x1000);
  Call(0x1010, 0x2000);
  model_.OnEvent(Ev(FlowKind::kDisable, 0, 0));  // e.g. left the filter range
  Enable(0x1015);  // back at foo's return address: foo returned while untraced
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B [untraced]", "E [untraced]", "E foo", "E main"));
  ExpectBalanced();
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
  Finish();
  EXPECT_THAT(sink_.Names(),
              ElementsAre("B main", "B foo", "B [untraced]", "E [untraced]", "B handler", "E handler",
                          "B __restore_rt", "B [syscall]", "E [syscall]", "E __restore_rt", "E foo", "E main"));
  ExpectBalanced();
}

TEST_F(ModelTest, JumpIntoTheMiddleOfAnAncestorUnwindsToIt) {
  Enable(0x1000);
  Call(0x1010, 0x2000);  // main → foo
  Call(0x2010, 0x3000);  // foo → bar
  Call(0x3010, 0x4000);  // bar → baz (__longjmp)
  Jump(0x4020, 0x1018);  // jmp *%rdx: back after main's setjmp call
  Call(0x1030, 0x2000);  // main calls foo again: a child of main, not of baz
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B bar", "B baz", "E baz", "E bar", "E foo",
                                         "B foo", "E foo", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kTailCalls], 0u);
  EXPECT_EQ(model_.stats()[Stat::kUnwinds], 1u);
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
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B bar", "B baz", "E baz", "E bar", "E foo", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kUnwinds], 1u);
  ExpectBalanced();
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
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B foo", "B foo", "E foo", "E foo", "E foo", "E main"));
  // foo(0) ends at the handler's entry, foo(1) at its own return.
  EXPECT_EQ(sink_.lines()[4], "E foo i=6");
  ExpectBalanced();
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
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "B bar", "B baz", "E baz", "E bar", "E foo", "E main"));
  EXPECT_EQ(model_.stats()[Stat::kTailCalls], 0u);
  ExpectBalanced();
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
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B foo", "E foo", "E main", "I decode error", "B bar", "E bar"));
  EXPECT_EQ(model_.stats()[Stat::kSegments], 2u);
  EXPECT_EQ(model_.stats()[Stat::kErrors], 1u);
  ExpectBalanced();
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
  Finish();
  EXPECT_THAT(sink_.Names(), ElementsAre("B main", "B unknown", "B [untraced]", "E [untraced]", "B bar", "E bar",
                                         "B [untraced]", "E [untraced]", "E unknown", "E main"));
  ExpectBalanced();
}

}  // namespace
}  // namespace ptd::decoder
