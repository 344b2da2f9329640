#pragma once
// The parallel-piece protocol, for any FlowDecoder. Parallel decoding cuts a buffer at
// PSBs into pieces, each decoded by its own decoder. A piece reproduces what one decoder
// over the whole buffer does between the same two PSBs; what it cannot know (the state
// the previous piece ends in) it guesses, and says so, so the stitcher can check the
// seam and redo the piece when the guess was wrong (rare).
//
// Checkpoints, each a PSB the single decoder passes: where to start keeping events
// (`emit_from`, a redo), the head digest (the piece's first PSB interval), the stop (the
// next piece's PSB), the tail digest (decoded on past the stop to the next PSB, then
// dropped). A continuing piece whose head differs from the previous piece's tail did not
// start where the single decoder was (TNT bits held across the PSB, a compressed return
// of a call before it).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "decoder/packets/cycle_index.h"
#include "decoder/flow/flow_decoder.h"

namespace ptd::decoder {

struct PieceSpec {
  // kSyncForward: the buffer's first piece; kResync: after a decode error that resyncs
  // at `start.psb`; kContinue: the single decoder passes `start.psb` in flight (its sync
  // state is carried in: guessed by speculative pieces).
  DecodeStart start;
  uint64_t stop_offset = UINT64_MAX;  // the next piece's PSB: stop once past it
  uint64_t head_psb = 0;              // the first PSB after start.psb (0: none)
  uint64_t tail_psb = 0;              // the first PSB after stop_offset (0: none)
  // Non-zero: decode from the buffer's start but keep only what follows the point where
  // the piece stopping at `emit_from` stops (the exact fallback: one decoder throughout).
  uint64_t emit_from = 0;
  // kContinue: whether tracing waits for an enable at the start (guessed).
  bool need_enable = false;
};

struct PieceOutcome {
  enum class End : uint8_t {
    kEnd,       // the decoder is done with the buffer (end of trace, or no PSB to resync on)
    kBoundary,  // reached `stop_offset`
    kResyncAt,  // a decode error resyncs at `resync_at` >= stop_offset
  };
  End end = End::kEnd;
  uint64_t resync_at = 0;
  // The remedy after an error read the carried-in sync state before it was replaced: the
  // piece is right only if the guess was.
  bool used_carried_resync = false;
  // What the decoder recorded besides the events (carried flush, last sample, whether
  // the carried need_enable was read); its list pointers are cleared.
  PieceRecording recorded;
  Stats stats;          // of this piece alone (instructions: piece-relative count)
  uint64_t errors = 0;  // kError events among the piece's events
  // Instructions and events of the first PSB interval: from this piece's start to
  // `head_psb` (head), and from `stop_offset` to `tail_psb` decoded on past the stop
  // (tail).
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

// Decodes one piece of `buffer` as `spec` says, into `events` and `time_steps` (see
// PieceRecording for what their values mean until stitched). `cycle_index`: the
// buffer's (config.cycles), else null.
absl::StatusOr<PieceOutcome> DecodePiece(FlowDecoder* decoder, const PtBuffer& buffer, const CycleIndex* cycle_index,
                                         const PieceSpec& spec, PieceEvents* events,
                                         TimeSteps* time_steps);

// The seam between two pieces: `expected` is what the previous piece ended in (its
// outcome's `next`, or a resync), `previous_tail` its tail digest; `ran` and `outcome`
// the piece decoded from its guessed spec; `head` its head as the single decoder counts
// it (with the carried branch's event, when it makes one). True: the piece's events
// are the single decoder's.
bool SeamHolds(const PieceSpec& expected, const PieceOutcome::Digest& previous_tail, const PieceSpec& ran,
               const PieceOutcome& outcome, const PieceOutcome::Digest& head);

// The spec that decodes a piece exactly when its seam does not hold: `expected` as
// above, `before` the spec the previous piece's events came from, `guessed` the piece's
// own spec. `*rest_of_buffer`: the redo decodes the rest of the buffer in one decoder
// (after two misses in a row), so the pieces after it are not used.
PieceSpec RedoSpec(const PieceSpec& expected, const PieceSpec& before, const PieceSpec& guessed, bool* rest_of_buffer);

}  // namespace ptd::decoder
