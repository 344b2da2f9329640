#include "decoder/parallel/piece_decoder.h"

#include <algorithm>

namespace ptd::decoder {
namespace {

// The protocol's checkpoints over one decode of a piece.
class PieceWatcher : public PsbWatcher {
 public:
  PieceWatcher(FlowDecoder* decoder, const PieceSpec& spec, PieceRecording* recording, PieceOutcome* outcome)
      : decoder_(decoder),
        spec_(spec),
        recording_(recording),
        outcome_(outcome),
        emitting_(spec.emit_from == 0),
        head_done_(spec.head_psb == 0),
        base_stats_(decoder->stats()) {}

  bool watches_psbs() const override { return spec_.stop_offset != UINT64_MAX || !emitting_ || !head_done_; }

  bool AtPsb(uint64_t at, const SyncState& sync) override {
    if (!emitting_ && at > spec_.emit_from) {
      // Where the piece before stopped: from here on, this is the continuing piece.
      emitting_ = true;
      decoder_->RestartPieceHere();
      base_stats_ = decoder_->stats();
      return false;
    }
    if (!emitting_) return false;
    if (!head_done_ && at > spec_.head_psb) {
      head_done_ = true;
      outcome_->head = Digest(false);
    }
    if (!in_overlap_ && at > spec_.stop_offset) {
      decoder_->SettleBranchSample();  // the branch carried to the next piece needs its time
      MarkStop(sync);
      if (spec_.tail_psb == 0) return Stop();
      in_overlap_ = true;  // decode on to the next PSB for the tail digest
      return false;
    }
    if (in_overlap_ && at > spec_.tail_psb) {
      outcome_->tail = TailDigest(false);
      return Stop();
    }
    return false;
  }

  bool EndsAtError(bool uses_carried_state) override {
    if (in_overlap_) return true;  // an error past the stop ends the tail
    if (uses_carried_state) outcome_->used_carried_resync = true;
    return false;
  }

  bool StopsBeforeResync(uint64_t psb) override {
    if (!emitting_ || psb < spec_.stop_offset) return false;
    outcome_->end = PieceOutcome::End::kResyncAt;
    outcome_->resync_at = psb;
    return true;
  }

  void AtEnd(const SyncState& sync) override {
    if (!head_done_) outcome_->head = Digest(true);
    if (in_overlap_ && !stopped_) outcome_->tail = TailDigest(true);
    if (stopped_ || in_overlap_) {
      // Back to the stop: the overlap was only looked at.
      if (in_overlap_) {
        decoder_->ForgetRunsSinceMark();
        recording_->events->TruncateTo(stop_.events);
        recording_->errors = stop_.errors;
        recording_->time_steps->words.resize(stop_.steps);
        recording_->sampled_time = stop_.sampled_time;
        recording_->last_sample = stop_.last_sample;
        decoder_->RestoreState(stop_.state);
      }
      outcome_->end = PieceOutcome::End::kBoundary;
      outcome_->next = NextSpec(stop_.state, stop_.sync);
      outcome_->pending = stop_.state.pending;
    } else {
      decoder_->SettleBranchSample();
      FlowState state = decoder_->SaveState();
      outcome_->next = NextSpec(state, sync);
      outcome_->pending = state.pending;
    }
    outcome_->stats = decoder_->stats().Since(base_stats_);
  }

 private:
  // The decode at the stop, to come back to after looking past it.
  struct StopMark {
    PieceEvents::Mark events;
    uint64_t errors = 0;
    size_t steps = 0;
    bool sampled_time = false;
    uint64_t last_sample = 0;
    FlowState state;
    SyncState sync;
  };

  bool Stop() {
    stopped_ = true;
    return true;
  }

  void MarkStop(const SyncState& sync) {
    decoder_->MarkObservedRuns();
    stop_.events = recording_->events->mark();
    stop_.errors = recording_->errors;
    stop_.steps = recording_->time_steps->size();
    stop_.sampled_time = recording_->sampled_time;
    stop_.last_sample = recording_->last_sample;
    stop_.state = decoder_->SaveState();
    stop_.sync = sync;
  }

  PieceOutcome::Digest Digest(bool ended) const {
    PieceOutcome::Digest d;
    d.instructions = decoder_->instructions();
    d.events = recording_->events->size();
    d.ended = ended;
    return d;
  }

  // The interval decoded past the stop.
  PieceOutcome::Digest TailDigest(bool ended) const {
    PieceOutcome::Digest d = Digest(ended);
    d.instructions -= stop_.state.instructions;
    d.events -= stop_.events.count;
    return d;
  }

  static PieceSpec NextSpec(const FlowState& state, const SyncState& sync) {
    PieceSpec next;
    next.need_enable = state.need_enable;
    next.start.sync = sync;
    return next;
  }

  FlowDecoder* decoder_;
  const PieceSpec& spec_;
  PieceRecording* recording_;
  PieceOutcome* outcome_;
  bool emitting_;
  bool head_done_;
  bool in_overlap_ = false;
  bool stopped_ = false;
  StopMark stop_;
  Stats base_stats_;
};

}  // namespace

absl::StatusOr<PieceOutcome> DecodePiece(FlowDecoder* decoder, const PtBuffer& buffer, const CycleIndex* cycle_index,
                                         const PieceSpec& spec, PieceEvents* events,
                                         TimeSteps* time_steps) {
  PieceOutcome outcome;
  PieceRecording recording;
  recording.events = events;
  recording.time_steps = time_steps;
  decoder->BeginPiece(&recording, cycle_index, spec.start.kind == DecodeStart::Kind::kContinue, spec.need_enable);
  PieceWatcher watcher(decoder, spec, &recording, &outcome);
  absl::Status status = decoder->DecodeWatched(buffer, spec.start, &watcher);
  decoder->EndPiece();
  if (!status.ok()) return status;
  outcome.recorded = recording;
  outcome.recorded.events = nullptr;
  outcome.recorded.time_steps = nullptr;
  outcome.errors = recording.errors;
  return outcome;
}

namespace {

// Whether a piece decoded speculatively holds for the state the previous piece ended in.
bool SpeculationHolds(const PieceSpec& expected, const PieceSpec& guess, const PieceOutcome& o) {
  if (expected.start.kind != guess.start.kind || expected.start.psb != guess.start.psb) return false;
  if (expected.start.kind != DecodeStart::Kind::kContinue) return true;
  if (o.recorded.used_carried_need_enable && expected.need_enable != guess.need_enable) return false;
  const SyncState& e = expected.start.sync;
  const SyncState& g = guess.start.sync;
  if (o.used_carried_resync &&
      (e.previous_call != g.previous_call || e.sync_offset != g.sync_offset || e.synced_once != g.synced_once)) {
    return false;
  }
  return true;
}

}  // namespace

bool SeamHolds(const PieceSpec& expected, const PieceOutcome::Digest& previous_tail, const PieceSpec& ran,
               const PieceOutcome& outcome, const PieceOutcome::Digest& head) {
  return expected.start.kind == DecodeStart::Kind::kContinue && SpeculationHolds(expected, ran, outcome) &&
         previous_tail == head && outcome.errors == 0;
}

PieceSpec RedoSpec(const PieceSpec& expected, const PieceSpec& before, const PieceSpec& guessed, bool* rest_of_buffer) {
  *rest_of_buffer = false;
  if (expected.start.kind == DecodeStart::Kind::kContinue && before.emit_from == 0) {
    // The piece did not start where the single decoder was (TNT held across the PSB, a
    // compressed return of a call before it, ...), but the previous piece's decoder was
    // there (its tail matched what came before): that decoder again, through the
    // previous piece, keeping this piece's part.
    PieceSpec exact = before;
    exact.emit_from = expected.start.psb;
    exact.head_psb = 0;
    exact.stop_offset = guessed.stop_offset;
    exact.tail_psb = guessed.tail_psb;
    return exact;
  }
  if (expected.start.kind == DecodeStart::Kind::kContinue) {
    // Twice in a row: one decoder from the buffer's start, keeping what follows the
    // previous piece, to the end.
    PieceSpec exact;
    exact.emit_from = expected.start.psb;
    *rest_of_buffer = true;
    return exact;
  }
  PieceSpec exact = expected;
  exact.stop_offset = guessed.stop_offset;
  exact.tail_psb = guessed.tail_psb;
  return exact;
}

}  // namespace ptd::decoder
