#pragma once
// A flow decoder turns the PT bytes of one stream into FlowEvents for the call-stack
// model. Three implement this interface (MakeFlowDecoder picks one by DecoderKind): the
// fast decoder (libipt's query decoder, Zydis, a block cache: fast_block_decoder.h) and
// libipt's block and instruction decoders (the references). All three give the same
// event sequence for the same trace (blocks end on every call and jump, so a block's
// last instruction is its only branch).
//
// A decoder decodes a whole chunk (DecodeChunk), or, for parallel decoding, a piece of
// one: the piece protocol (piece_decoder.h) starts it at a PSB with a guessed state,
// watches the PSBs it passes (PsbWatcher), records instead of delivering
// (PieceRecording), and saves and restores its flow state at a border (FlowState).
// No global state: one object per stream or worker thread, each with its own images.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/host_info.h"
#include "common/trace_meta.h"
#include "decoder/packets/cycle_index.h"
#include "decoder/packets/time_index.h"
#include "decoder/flow/flow_event.h"
#include "decoder/flow/insn_classifier.h"
#include "decoder/packets/packet_query.h"
#include "decoder/flow/piece_events.h"
#include "decoder/stats.h"
#include "decoder/flow/time_interpolator.h"
#include "image/process_image.h"

namespace ptd::decoder {

class SectionBlockCache;

// kFast: the fast block source (fast_block_decoder.h), libipt's query decoder under it;
// kBlock, kInsn: libipt's block and instruction decoders (the references).
enum class DecoderKind { kFast, kBlock, kInsn };

// Sees every run of instructions (tests expand them to compare against libipt's own
// output; nothing in the product needs it).
class BlockObserver {
 public:
  virtual ~BlockObserver() = default;
  // `count` instructions executed from `ip` to `end_ip` (the last one), in order.
  virtual void OnBlock(uint64_t ip, uint64_t end_ip, uint32_t count) = 0;
  // The same run, `times` times. Only an observer that counts_runs() gets these: the fast
  // decoder's multi-block path counts the straight-line runs it takes (each ends at its
  // first branch) and reports them later, out of order, but before the decoder's image
  // changes (the image that ran them is still the current one).
  virtual void OnBlocks(uint64_t ip, uint64_t end_ip, uint32_t count, uint64_t times) {
    for (uint64_t i = 0; i < times; ++i) OnBlock(ip, end_ip, count);
  }
  // False: every run, in order (what the tests compare). True: order does not matter
  // (coverage), and the fast decoder keeps its multi-block path.
  virtual bool counts_runs() const { return false; }
  // Piece mode (--jobs N, piece_decoder.h): a piece's runs are those decoded from its
  // start to its stop, as its events are. Its decoder hands over the runs it counted,
  // then says that what was observed so far is not the piece's (a redo decodes from an
  // earlier PSB: ForgetRuns), where the stop is (MarkRuns), and that what followed the
  // mark is not the piece's either (decoded past the stop for the tail digest).
  virtual void ForgetRuns() {}
  virtual void MarkRuns() {}
  virtual void ForgetRunsSinceMark() {}
};

// Keeps a decoder's code image in step with the trace's time (every time axis, when the
// stream has timing packets): mappings
// made or replaced (dlopen, exec) and, for per-CPU streams, the process the CPU runs.
// The decoder calls AdvanceTo when an event's time (libipt's, of the timing packets
// before the event) reaches next_change() (one comparison per event with a time), and
// always at the first such time of each buffer or piece, which may be earlier than the
// last (a redo from a buffer's start).
class ImageClock {
 public:
  virtual ~ImageClock() = default;
  // The image as it is at `time_ns`: decode with it from now on.
  virtual image::ProcessImage* AdvanceTo(uint64_t time_ns) = 0;
  // The image now (before the first AdvanceTo: not placed yet, possibly empty).
  virtual image::ProcessImage* image() = 0;
  // The earliest time after the last AdvanceTo at which the image changes; UINT64_MAX:
  // never.
  virtual uint64_t next_change() const = 0;
  // Changes whenever the image's contents do (what was cached by address is stale).
  virtual uint64_t version() const = 0;
};

struct PtDecodeConfig {
  DecoderKind kind = DecoderKind::kFast;
  TimeAxis axis = TimeAxis::kInstructions;
  CpuId cpu;                  // vendor "intel" selects errata
  PtSettings pt;              // cpuid 0x15, nom_freq, mtc_freq
  TimeConversion conversion;  // TSC → ns
  // The stream has CYC packets: every buffer is indexed (cycle_index.h) and events carry
  // `cycles`. Off: no lookups at all.
  bool cycles = false;
  // The fast decoder's runs of code shared by section with the decode's other streams
  // (section_block_cache.h); null: each stream decodes all it runs.
  SectionBlockCache* section_blocks = nullptr;
};

// Zero bytes every buffer handed to libipt must have after its end.
inline constexpr size_t kPtPadding = 64;

// The bytes of one buffer (a chunk of the stream).
struct PtBuffer {
  const uint8_t* padded = nullptr;  // size + kPtPadding bytes, the tail zero
  size_t size = 0;
  uint64_t base_offset = 0;  // the buffer's offset in the stream (error messages)
  const std::vector<uint64_t>* psbs = nullptr;  // every PSB offset (the resync remedy)
  // What the fast decoder's query layer needs to know of the bytes (scanned once per
  // buffer; the default sends it to libipt's query decoder).
  PacketQuery::Scan packet_scan;
  // The time of each packet (time axis; built by the first decoder that asks): null, the
  // time the flow decoder reports.
  std::shared_ptr<SharedTimeIndex> times;
};

// The resync remedy's state (where to resynchronize after an error), as it is at a point
// of the decode; a piece that continues another starts with the other's.
struct SyncState {
  uint64_t previous_call = 0;  // decoder offset before the last step
  uint64_t sync_offset = 0;    // the last sync point
  bool synced_once = false;
};

// Where a decode of a buffer starts.
struct DecodeStart {
  enum class Kind : uint8_t {
    kSyncForward,  // sync on the first PSB
    kResync,       // sync at `psb` as after a decode error
    kContinue,     // the single decoder passes `psb` in flight: no new segment
  };
  Kind kind = Kind::kSyncForward;
  uint64_t psb = 0;
  SyncState sync;  // kContinue: carried in
};

// Watches a decode at the PSBs it passes (the piece protocol's checkpoints).
class PsbWatcher {
 public:
  virtual ~PsbWatcher() = default;
  // Whether AtPsb is wanted at all (most pieces watch; a whole buffer does not).
  virtual bool watches_psbs() const = 0;
  // The decoder passes the PSB at `offset` (a PSB+ bound at its IP, or read while tracing
  // is off): every instruction before it has run. True: stop here, before it.
  virtual bool AtPsb(uint64_t offset, const SyncState& sync) = 0;
  // A decode error: true ends the decode here (not reported). `uses_carried_state`: the
  // remedy would read the sync state the decode was started with.
  virtual bool EndsAtError(bool uses_carried_state) = 0;
  // The remedy would resync at `psb`: true ends the decode instead.
  virtual bool StopsBeforeResync(uint64_t psb) = 0;
  // The decode is done (end, stop, or cancel): the sync state at its end.
  virtual void AtEnd(const SyncState& sync) = 0;
};

// The steps of the time axis inside a piece, replayed when the piece is stitched, as
// words (pieces write millions, and the stitcher reads them back long out of the
// cache): a Now() sample is one word, its piece-relative instruction count; a timing
// update two, the TSC with kUpdate set (TSCs have 56 bits; kAtEvent: an event's own
// time), then the count. A sample is named by its word's index.
struct TimeSteps {
  static constexpr uint64_t kUpdate = uint64_t{1} << 63;
  static constexpr uint64_t kAtEvent = uint64_t{1} << 62;
  static constexpr uint64_t kSeed = uint64_t{1} << 61;  // only if no piece before gave a time
  std::vector<uint64_t> words;
  size_t AddSample(uint64_t instructions) {
    words.push_back(instructions);
    return words.size() - 1;
  }
  void AddUpdate(uint64_t tsc, uint64_t instructions, bool at_event, bool seed = false) {
    words.push_back(tsc | kUpdate | (at_event ? kAtEvent : 0) | (seed ? kSeed : 0));
    words.push_back(instructions);
  }
  size_t size() const { return words.size(); }
  size_t capacity() const { return words.capacity(); }
  void clear() { words.clear(); }
  void reserve(size_t steps) { words.reserve(steps); }
};

// The branch that ended the last block, waiting for the next block (its target).
struct PendingBranch {
  bool valid = false;
  InsnClass klass = InsnClass::kOther;
  uint64_t ip = 0;
  uint64_t fallthrough = 0;
  uint64_t instructions = 0;
  uint64_t cycles = 0;
  uint64_t time = 0;
  bool timed = true;         // false: `time` is still to be sampled (the decoder settles it)
  bool after_raise = false;  // an OCaml raise came before it: the model needs the branch
  uint64_t run_start = 0;    // where execution went on straight to it (after the last branch)
};

// Piece mode: what the decoder records instead of handing events to its consumer.
// Events carry instruction counts relative to the piece's start; on the time axis their
// `time` names the Now() sample in `time_steps` that gave it, on the
// instruction axis the piece-relative count; each carries its image time
// (FlowEvent::image_tsc). The stitcher turns them into real values.
struct PieceRecording {
  PieceEvents* events = nullptr;
  TimeSteps* time_steps = nullptr;
  uint64_t errors = 0;  // kError events among `events` (counted as they come)
  // Instruction axis: the last time handed out (piece-relative), if any.
  bool sampled_time = false;
  uint64_t last_sample = 0;
  // The first flush of the branch carried in from the previous piece (its class is not
  // known here): it goes before event `carried_flush_index` with this target.
  bool carried_flush = false;
  size_t carried_flush_index = 0;
  uint64_t carried_flush_target = 0;
  bool carried_flush_known = false;
  // The carried-in "tracing waits for an enable" was read before being overwritten: the
  // piece is right only if the guess was.
  bool used_carried_need_enable = false;
};

// What a decoder carries from one point of a buffer to the next (saved at a piece's
// border, restored after looking past it).
struct FlowState {
  uint64_t instructions = 0;
  Stats stats;
  bool need_enable = false;
  PendingBranch pending;
};

class FlowDecoder {
 public:
  virtual ~FlowDecoder() = default;

  // Decodes `padded[0, size)`; `padded` must hold size + kPtPadding bytes, the tail zero.
  // `base_offset` is the chunk's offset in the stream (for error messages). Decode errors
  // become kError events, not a failed status; a failed status means the decoder could
  // not run at all.
  virtual absl::Status DecodeChunk(const uint8_t* padded, size_t size, uint64_t base_offset) = 0;
  // Emits a kLostData event (gap between chunks).
  virtual void MarkLostData(uint64_t offset) = 0;

  // Counters: instructions, blocks, syncs, bytes, undecodable.
  virtual Stats stats() const = 0;
  virtual const std::vector<std::string>& warnings() const = 0;
  virtual uint64_t instructions() const = 0;
  virtual uint64_t last_time() const = 0;
  // CYC payloads of every chunk decoded so far (config.cycles).
  virtual uint64_t cycles_total() const = 0;

  virtual void set_block_observer(BlockObserver* observer) = 0;
  // Streams with timing packets: the image follows `clock` (which then supplies every
  // image: the one given at construction is replaced by the clock's).
  virtual void set_image_clock(ImageClock* clock) = 0;
  // Checked between blocks: when it turns true, decoding stops (Ctrl-C).
  virtual void set_cancel_flag(const std::atomic<bool>* cancel) = 0;
  // Called every few thousand steps with the decoder's offset in the buffer (progress).
  virtual void set_progress(std::function<void(uint64_t offset)> progress) = 0;
  virtual bool cancelled() const = 0;

  // --- Piece mode (piece_decoder.h); the decoder's images must not be shared with
  // another thread.
  // Starts recording into `recording` (counts from zero, nothing carried in; kContinue:
  // tracing waits for an enable as `need_enable` says, and a branch of unknown class is
  // pending). Cycles are looked up in `cycle_index` (the buffer's, relative to its start).
  virtual void BeginPiece(PieceRecording* recording, const CycleIndex* cycle_index, bool continuing,
                          bool need_enable) = 0;
  virtual void EndPiece() = 0;
  // Decodes `buffer` from `start` until its end, a stop the watcher asks for, or cancel.
  virtual absl::Status DecodeWatched(const PtBuffer& buffer, const DecodeStart& start, PsbWatcher* watcher) = 0;
  // Forgets what was decoded so far in the piece: what follows starts the piece (its
  // counts from zero; the branch pending now is the one carried in).
  virtual void RestartPieceHere() = 0;
  // Takes the time sample of the newest branch now (the next piece needs it).
  virtual void SettleBranchSample() = 0;
  virtual FlowState SaveState() const = 0;
  virtual void RestoreState(const FlowState& state) = 0;
  // The block observer's piece mode: the stop is here (MarkRuns); back to it
  // (ForgetRunsSinceMark).
  virtual void MarkObservedRuns() = 0;
  virtual void ForgetRunsSinceMark() = 0;
};

std::unique_ptr<FlowDecoder> MakeFlowDecoder(const PtDecodeConfig& config, image::ProcessImage* image,
                                             FlowConsumer* consumer);

// The event a pending branch becomes once its target is known; false for branches that
// make none. Inline: every call, return and syscall event is made here.
inline bool PendingEvent(const PendingBranch& pending, uint64_t target, bool known, FlowEvent* event) {
  switch (pending.klass) {
    case InsnClass::kCall: event->kind = FlowKind::kCall; break;
    case InsnClass::kReturn: event->kind = FlowKind::kReturn; break;
    case InsnClass::kFarCall: event->kind = FlowKind::kSyscall; break;
    case InsnClass::kJump:
    case InsnClass::kCondJump:
    case InsnClass::kFarJump:
    case InsnClass::kFarReturn: event->kind = FlowKind::kJump; break;
    default: return false;
  }
  event->ip = pending.ip;
  event->target = target;
  event->target_known = known;
  event->fallthrough = pending.fallthrough;
  event->instructions = pending.instructions;
  event->cycles = pending.cycles;
  event->time = pending.time;
  return true;
}

// A jump (taken or not) inside one function, reached without leaving that function
// since the last branch, changes no call stack, so it makes no event: most branches
// are such jumps, and an event each would cost more than libipt's own work. (Code that
// falls through into the next function keeps its jumps: the model names the function
// from them; so does a function with inlined calls, whose runs between events the model
// walks for inlined frames.) A pure function of the branch, its target and the image, so every
// decoder of a stream (whole or piece) and the stitcher drop the same ones.
bool StaysInFunction(const image::ProcessImage& image, const PendingBranch& pending, uint64_t target, bool known);

}  // namespace ptd::decoder
