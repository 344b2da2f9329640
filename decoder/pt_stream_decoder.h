#pragma once
// Drives one libipt decoder (block or instruction flow) over the chunks of one PT stream
// and turns what it reports into FlowEvents. Both decoders give the same event sequence:
// blocks end on every call and jump (end_on_call, end_on_jump), so a block's last
// instruction is the only branch in it.
//
// libipt 2.0.5 quirks handled here: blocks classed ptic_error (classified with capstone),
// resync after an error that would skip a good PSB segment (sync_set on the first PSB at
// or after the offset of the call before the error), 16+ zero bytes after the buffer
// (the PSB search reads past the end), and -pte_bad_cpu (no errata, with a warning).
// No global state: one object per stream or piece; pieces and streams are decoded on
// separate threads, each with its own libipt image (pt_image moves the section it finds
// to the front: not safe to share).

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/host_info.h"
#include "common/trace_meta.h"
#include "decoder/cycle_index.h"
#include "decoder/fast_block_decoder.h"
#include "decoder/flow_event.h"
#include "decoder/insn_classifier.h"
#include "decoder/trap_scanner.h"
#include "decoder/time_interpolator.h"
#include "image/process_image.h"

struct pt_block;
struct pt_event;
struct pt_image;
struct pt_block_decoder;
struct pt_insn_decoder;

namespace ptd::decoder {

// kFast: the fast block source (fast_block_decoder.h), libipt's query decoder under it;
// kBlock, kInsn: libipt's block and instruction decoders (the references).
enum class DecoderKind { kFast, kBlock, kInsn };

class FlowConsumer {
 public:
  virtual ~FlowConsumer() = default;
  virtual void OnFlow(const FlowEvent& event) = 0;
};

// Sees every run of instructions (tests expand them to compare against libipt's own
// output; nothing in the product needs it).
class BlockObserver {
 public:
  virtual ~BlockObserver() = default;
  // `count` instructions executed from `ip` to `end_ip` (the last one), in order.
  virtual void OnBlock(uint64_t ip, uint64_t end_ip, uint32_t count) = 0;
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
};

struct PtDecodeStats {
  uint64_t instructions = 0;
  uint64_t blocks = 0;      // block decoder: blocks; instruction decoder: branches
  uint64_t errors = 0;
  uint64_t overflows = 0;
  uint64_t syncs = 0;
  uint64_t bytes = 0;
  uint64_t undecodable = 0; // instructions capstone could not classify
};

// Zero bytes every buffer handed to libipt must have after its end.
inline constexpr size_t kPtPadding = 64;

// The branch that ended the last block, waiting for the next block (its target).
struct PendingBranch {
  bool valid = false;
  InsnClass klass = InsnClass::kOther;
  uint64_t ip = 0;
  uint64_t fallthrough = 0;
  uint64_t instructions = 0;
  uint64_t cycles = 0;
  uint64_t time = 0;
  bool timed = true;         // false: `time` is still to be sampled (see SettleBranchSample)
  bool after_raise = false;  // an OCaml raise came before it: the model needs the branch
  uint64_t run_start = 0;    // where execution went on straight to it (after the last branch)
};

// Parallel decoding cuts a buffer at PSBs into pieces, each decoded by its own libipt
// decoder. A piece reproduces what one decoder over the whole buffer does between the
// same two PSBs; what it cannot know (the state the previous piece ends in) it guesses,
// and says so, so the stitcher can redo it when the guess was wrong (rare).
struct PieceSpec {
  enum class Start : uint8_t {
    kSyncForward,  // the buffer's first piece: sync on the first PSB
    kResync,       // sync at `start_psb` as after a decode error
    kContinue,     // the single decoder passes `start_psb` in flight: no new segment
  };
  Start start = Start::kSyncForward;
  uint64_t start_psb = 0;
  uint64_t stop_offset = UINT64_MAX;  // the next piece's PSB: stop once past it
  uint64_t head_psb = 0;              // the first PSB after start_psb (0: none)
  uint64_t tail_psb = 0;              // the first PSB after stop_offset (0: none)
  // Non-zero: decode from the buffer's start but keep only what follows the point where
  // the piece stopping at `emit_from` stops (the exact fallback: one decoder throughout).
  uint64_t emit_from = 0;
  // kContinue: the previous piece's final state. Guessed by speculative pieces.
  bool need_enable = false;
  uint64_t previous_call = 0;  // decoder offset before the last next() (error remedy)
  uint64_t sync_offset = 0;
  bool synced_once = false;
};

struct PieceOutcome {
  enum class End : uint8_t {
    kEnd,       // the decoder is done with the buffer (end of trace, or no PSB to resync on)
    kBoundary,  // reached `stop_offset`
    kResyncAt,  // a decode error resyncs at `resync_at` >= stop_offset
  };
  End end = End::kEnd;
  uint64_t resync_at = 0;
  // Read a carried-in (kContinue) value before overwriting it: the piece is right only
  // if the guess was.
  bool used_carried_need_enable = false;
  bool used_carried_resync = false;
  // The first flush of the branch carried in from the previous piece: it goes before
  // event `carried_flush_index` with this target.
  bool carried_flush = false;
  size_t carried_flush_index = 0;
  uint64_t carried_flush_target = 0;
  bool carried_flush_known = false;
  // Instruction axis: the last time handed out (piece-relative), if any.
  bool sampled_time = false;
  uint64_t last_sample = 0;
  PtDecodeStats stats;  // of this piece alone (instructions: piece-relative count)
  // Instructions and events of the first PSB interval: from this piece's start to
  // `head_psb` (head), and from `stop_offset` to `tail_psb` decoded on past the stop
  // (tail). A continuing piece whose head differs from the previous piece's tail did not
  // start where the single decoder was (e.g. TNT bits held across the PSB).
  struct Digest {
    uint64_t instructions = 0;
    uint64_t events = 0;  // not blocks: a fresh decoder may split a block the other did not
    bool ended = false;   // the decoder stopped (end, error) before the PSB
    bool operator==(const Digest& o) const {
      return instructions == o.instructions && events == o.events && ended == o.ended;
    }
  };
  Digest head;
  Digest tail;
  // Final state (kBoundary): what the next piece continues from.
  PieceSpec next;
  PendingBranch pending;  // instructions piece-relative; time as for events
};

// One step of the time axis inside a piece, replayed when the piece is stitched.
struct TimeStep {
  bool update = false;        // true: a timing packet said `tsc`; false: a Now() sample
  uint64_t tsc = 0;
  uint64_t instructions = 0;  // piece-relative
};

class PtStreamDecoder {
 public:
  PtStreamDecoder(const PtDecodeConfig& config, image::ProcessImage* image, FlowConsumer* consumer);

  // Decodes `padded[0, size)`; `padded` must hold size + kPtPadding bytes, the tail zero.
  // `base_offset` is the chunk's offset in the stream (for error messages). Decode errors
  // become kError events, not a failed status; a failed status means the decoder could
  // not run at all.
  absl::Status DecodeChunk(const uint8_t* padded, size_t size, uint64_t base_offset);

  // Parallel decoding: one piece of a buffer (`psbs` are the buffer's PSB offsets); the
  // decoder's images must not be shared with another thread. Events carry
  // instruction counts relative to the piece's start; on the time axis their `time` is
  // an index into `time_steps` (the Now() sample that gave it), on the instruction axis
  // the piece-relative count. The stitcher turns both into real values.
  absl::StatusOr<PieceOutcome> DecodePiece(const uint8_t* padded, size_t size, uint64_t base_offset,
                                           const std::vector<uint64_t>& psbs, const PieceSpec& spec,
                                           std::vector<FlowEvent>* events,
                                           std::vector<TimeStep>* time_steps);

  const PtDecodeStats& stats() const { return stats_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  uint64_t instructions() const { return instructions_; }
  uint64_t last_time() const { return clock_.last(); }
  // CYC payloads of every chunk decoded so far (config.cycles).
  uint64_t cycles_total() const { return cycles_total_; }
  // Parallel decoding: the next DecodePiece looks cycles up in `index` (its buffer's),
  // relative to the buffer's start (the stitcher adds the buffer's base).
  void set_piece_cycle_index(const CycleIndex* index) { piece_cycle_index_ = index; }

  void set_block_observer(BlockObserver* observer) { observer_ = observer; }
  // Streams with timing packets: the image follows `clock` (which then supplies every image: the one given
  // to the constructor and DecodePiece's are replaced by the clock's).
  void set_image_clock(ImageClock* clock) { image_clock_ = clock; }
  // Checked between blocks: when it turns true, decoding stops (Ctrl-C).
  void set_cancel_flag(const std::atomic<bool>* cancel) { cancel_ = cancel; }
  // Called every few thousand steps with the decoder's offset in the buffer (progress).
  void set_progress(std::function<void(uint64_t offset)> progress) { progress_ = std::move(progress); }
  bool cancelled() const { return cancelled_; }

  // Emits a kLostData event (gap between chunks).
  void MarkLostData(uint64_t offset);

  // The event a pending branch becomes once its target is known; false for branches
  // that make none.
  static bool PendingEvent(const PendingBranch& pending, uint64_t target, bool known, FlowEvent* event);
  // A jump (taken or not) inside one function, reached without leaving that function
  // since the last branch, changes no call stack, so it makes no event: most branches
  // are such jumps, and an event each would cost more than libipt's own work. (Code that
  // falls through into the next function keeps its jumps: the model names the function
  // from them.) A pure function of the branch, its target and the image, so every
  // decoder of a stream (whole or piece) and the stitcher drop the same ones.
  static bool StaysInFunction(const image::ProcessImage& image, const PendingBranch& pending, uint64_t target,
                              bool known);

 private:
  friend struct BlockApi;
  friend struct InsnApi;
  friend struct FastApi;

  // A point of the decode to come back to (the end of a piece, before its overlap).
  struct Mark {
    size_t events = 0;
    size_t steps = 0;
    bool sampled_time = false;  // instruction axis: PieceOutcome's, as of the mark
    uint64_t last_sample = 0;
    uint64_t instructions = 0;
    PtDecodeStats stats;
    PieceSpec next;
    PendingBranch pending;
  };
  Mark MarkHere(uint64_t previous_call, uint64_t sync_offset, bool synced_once) const;
  template <class Api>
  absl::Status Run(const uint8_t* begin, size_t size, uint64_t base_offset, const std::vector<uint64_t>& psbs,
                   const PieceSpec& spec, PieceOutcome* outcome);
  int NextBlock(pt_block_decoder* decoder);
  int NextFastBlock(FastBlockDecoder* decoder);
  // What a block (libipt's or the fast decoder's) means to the flow.
  template <class Api>
  void HandleBlock(const pt_block& block, typename Api::Decoder* decoder, bool starts_run);
  template <class Api>
  bool TimeRunStart(typename Api::Decoder* decoder);
  int NextInsn(pt_insn_decoder* decoder);
  void OnInstructionRun(uint64_t first_ip, uint64_t count);
  void StartRun(uint64_t first_ip);
  bool ReadNeedEnable();
  void SetPending(InsnClass klass, uint64_t ip, uint64_t size);
  void FlushPending(uint64_t target, bool known);
  bool PendingStaysInFunction(uint64_t target, bool known);
  void HandleEvent(const pt_event& event);
  void Emit(FlowKind kind, uint64_t target, bool known, uint64_t offset = 0, const char* message = "");
  // To the consumer, or (pieces) to the piece's events stamped with the image time.
  void Deliver(FlowEvent& event);
  void UpdateTime(uint64_t tsc);
  void AdvanceImage(uint64_t tsc);
  void UseImage(image::ProcessImage* image);
  uint64_t Now();
  uint64_t TimeSample(uint64_t instructions);
  void SettleBranchSample();
  void WarnErrata();

  PtDecodeConfig config_;
  image::ProcessImage* image_;
  ImageClock* image_clock_ = nullptr;
  uint64_t next_image_change_ = 0;  // ns; 0: advance at the next timing update
  uint64_t image_version_ = 0;
  pt_image* libipt_image_ = nullptr;  // the one the running libipt decoder uses
  // Gives the running libipt decoder another image (per-CPU streams: another process).
  std::function<void(pt_image*)> set_libipt_image_;
  FlowConsumer* consumer_;
  BlockObserver* observer_ = nullptr;
  const std::atomic<bool>* cancel_ = nullptr;
  std::function<void(uint64_t offset)> progress_;
  bool cancelled_ = false;
  InsnClassifier classifier_;
  // kFast: blocks by start IP, kept across chunks and pieces while the image stays.
  FastBlockCache fast_cache_;
  FastBlockDecoder* fast_ = nullptr;  // the running fast decoder, if any
  TrapScanner traps_;  // OCaml trap push/pop/raise inside runs
  bool errata_ok_ = true;
  bool need_enable_ = true;
  PendingBranch pending_;
  bool raise_emitted_ = false;  // a kRaise not yet followed by a return or jump event
  uint64_t run_start_ = 0;      // first instruction after the last branch (0: not yet seen)
  image::FunctionRange pending_range_;  // function of the last pending jump (cache; UseImage clears it)
  uint64_t instructions_ = 0;
  uint64_t enable_time_ = 0;  // FlowEvent::enable_time of the kEnable being emitted
  // config.cycles: the current buffer's index, looked up after each libipt step.
  CycleIndex chunk_cycles_;
  const CycleIndex* piece_cycle_index_ = nullptr;
  CycleCursor cycles_;
  uint64_t cycles_total_ = 0;
  TimeInterpolator clock_;
  // Piece mode: time steps are logged instead of computed; the carried-in state is a
  // guess until overwritten.
  std::vector<TimeStep>* time_steps_ = nullptr;
  // The last TSC UpdateTime was given: repeats change nothing (the clock ignores them,
  // and so does its replay of a piece's steps).
  uint64_t last_update_tsc_ = 0;
  // The newest branch's time sample, not taken yet (time and instruction axes): at this
  // instruction count.
  bool unsampled_ = false;
  uint64_t unsampled_at_ = 0;
  uint64_t image_tsc_ = 0;  // the newest event TSC (the image's time); pieces: their own
  bool need_enable_carried_ = false;
  PieceOutcome* outcome_ = nullptr;
  std::vector<FlowEvent>* piece_events_ = nullptr;
  PtDecodeStats stats_;
  std::vector<std::string> warnings_;
};

// Offsets of every PSB in `bytes` (the resync remedy needs them).
std::vector<uint64_t> FindPsbOffsets(absl::Span<const uint8_t> bytes);

// True when the stream has TSC packets: every PSB+ holds one when TSC is enabled, so the
// first two PSB+ groups (within `limit` bytes) tell.
bool StreamHasTsc(absl::Span<const uint8_t> padded_bytes, size_t size, size_t limit = 1 << 20);

}  // namespace ptd::decoder
