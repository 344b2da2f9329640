#pragma once
// Each thread's call-stack model and sinks, and the router that hands a stream's events to
// the model of the thread that runs them (DecodeTrace's internals).

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "decoder/flow/flow_decoder.h"
#include "decoder/model/call_stack_model.h"
#include "decoder/model/function_resolver.h"
#include "decoder/output/detail_filter.h"
#include "decoder/output/function_stats_sink.h"

namespace ptd::decoder {

// One thread's model and where its slices go.
struct ThreadState {
  int pid = 0;
  int tid = 0;
  std::unique_ptr<ImageFunctionResolver> resolver;
  std::unique_ptr<CallStackModel> model;
  SliceSink* sink = nullptr;  // the model's: the first of the sinks below in use
  std::unique_ptr<FunctionStatsSink> stats_sink;  // --summary: every slice
  std::unique_ptr<DetailFilterSink> detail_sink;  // level of detail

  uint64_t routed_instructions = 0;  // per-CPU streams: this thread's own count so far
  bool routed = false;
};

// Feeds a stream's events to the model of the thread that runs them: the stream's own
// thread, or (per-CPU streams) the thread the schedule says was on the CPU then.
// A thread switched out keeps its open frames: it continues where it stopped when it
// runs again. Per-CPU streams count instructions for the CPU, so each routed event
// carries the instructions of its own thread instead.
class ThreadRouter : public FlowConsumer {
 public:
  using ThreadLookup = std::function<ThreadState*(uint64_t time)>;
  // `fixed`: the stream's only thread; else `lookup` routes by time.
  ThreadRouter(ThreadState* fixed, ThreadLookup lookup) : fixed_(fixed), lookup_(std::move(lookup)) {}

  // User-only tracing: a context switch runs in the kernel, so one thread's user code
  // ends with a disable (TIP.PGD) and the next one's begins with an enable (TIP.PGE, or
  // the first run after a sync or an overflow). Each enabled stretch then goes as a
  // whole to the thread on the CPU at its enable: at the time of the timing packets
  // before its TIP.PGE (FlowEvent::enable_time), not at the interpolated event times,
  // which may run past a switch (and, never going back, stay there).
  void RouteWholeSegments() { whole_segments_ = true; }

  void OnFlow(const FlowEvent& event) override {
    if (fixed_ != nullptr) {
      fixed_->model->OnEvent(event);  // a tail call: nothing per event here
      return;
    }
    Route(event);
  }
  // `cycles`: the stream's total (only a fixed thread's model counts cycles).
  void Finish(uint64_t time, uint64_t instructions, uint64_t cycles) {
    if (fixed_ != nullptr) {
      fixed_->model->Finish(time, instructions, cycles);
      return;
    }
    for (ThreadState* thread : routed_) {
      thread->model->Finish(thread->model->last_time(), thread->routed_instructions, 0);
    }
  }

 private:
  // Out of line, so the fixed thread's path above stays a few instructions per event.
  [[gnu::noinline]] void Route(const FlowEvent& event) {
    // The instructions since the previous event ran on the thread that is on the CPU now.
    uint64_t executed = event.instructions - stream_instructions_;
    stream_instructions_ = event.instructions;
    ThreadState* thread = nullptr;
    if (in_segment_ && event.kind != FlowKind::kEnable) {
      thread = segment_thread_;
    } else if (lookup_) {
      thread = lookup_(whole_segments_ && event.enable_time != 0 ? event.enable_time : event.time);
    }
    if (whole_segments_) {
      if (event.kind == FlowKind::kEnable) {
        in_segment_ = true;
        segment_thread_ = thread;
      } else if (event.kind == FlowKind::kDisable || event.kind == FlowKind::kOverflow ||
                 event.kind == FlowKind::kError || event.kind == FlowKind::kLostData) {
        in_segment_ = false;  // this event still belongs to the stretch it ends
      }
    }
    if (thread == nullptr) return;
    if (!thread->routed) {
      thread->routed = true;
      routed_.push_back(thread);
    }
    thread->routed_instructions += executed;
    FlowEvent own = event;
    own.instructions = thread->routed_instructions;
    thread->model->OnEvent(own);
  }

  ThreadState* fixed_;
  ThreadLookup lookup_;
  bool whole_segments_ = false;
  bool in_segment_ = false;  // between an enable and what ends its stretch
  ThreadState* segment_thread_ = nullptr;
  uint64_t stream_instructions_ = 0;
  std::vector<ThreadState*> routed_;  // threads this per-CPU stream fed, to finish at its end
};

}  // namespace ptd::decoder
