#pragma once
// The small value the libipt drivers produce and the call-stack model consumes: one
// control-flow fact per value. Both decoders (block and instruction) produce the same
// sequence for the same trace; tests feed hand-written sequences to the model.

#include <cstdint>

namespace ptd::decoder {

enum class FlowKind : uint8_t {
  kCall,      // near call at `ip` to `target`; `fallthrough` is the return address
  kReturn,    // near return at `ip` to `target` (unknown when tracing stopped first)
  kJump,      // taken jump (conditional or not) from `ip` to `target`
  kSyscall,   // far call (syscall, int) at `ip`; `fallthrough` is where user code resumes
  kDisable,   // tracing stopped (filter exit, kernel entry, interrupt)
  kEnable,    // tracing (re)started at `target`
  kTrapPush,  // exception handler pushed (OCaml try) at `ip`
  kTrapPop,   // exception handler popped at `ip`
  kRaise,     // stack switched to the innermost handler (OCaml raise); the next branch
              // enters the handler
  kError,     // decode error: `message`, trace byte `offset`
  kOverflow,  // the CPU dropped packets (OVF)
  kLostData,  // bytes missing between chunks (snapshot gap, truncated AUX)
};

struct FlowEvent {
  FlowKind kind = FlowKind::kJump;
  bool target_known = true;
  uint64_t ip = 0;
  uint64_t target = 0;
  uint64_t fallthrough = 0;
  uint64_t instructions = 0;  // executed so far on this thread, including this instruction
  uint64_t cycles = 0;        // CPU cycles so far (CYC packets), 0 when not traced
  uint64_t time = 0;          // on the chosen time axis
  uint64_t offset = 0;        // trace byte offset (errors, overflow, lost data)
  // kEnable at a TIP.PGE, time axis: the time libipt gives the PGE (of the timing packets
  // before it), in ns, neither interpolated nor clamped like `time`; 0: unknown. Per-CPU
  // streams route the enabled stretch by it.
  uint64_t enable_time = 0;
  const char* message = "";   // static text (libipt error strings)
  // Pieces only: the newest event TSC the piece's decoder had seen when it emitted this
  // (its image time); 0: none yet in the piece. The stitcher brings the models' image
  // there before the event goes on, as the single decoder's image was.
  uint64_t image_tsc = 0;
};

// Takes a stream's events in order.
class FlowConsumer {
 public:
  virtual ~FlowConsumer() = default;
  virtual void OnFlow(const FlowEvent& event) = 0;
};

}  // namespace ptd::decoder
