// PtStreamDecoder as a parallel piece's decoder (the piece protocol of flow_decoder.h):
// the state carried in and out, and the events it records instead of delivering.
#include "decoder/flow/pt_stream_decoder.h"

namespace ptd::decoder {

[[gnu::noinline]] void PtStreamDecoder::RecordInPiece(FlowEvent& event) {
  event.image_tsc = image_tsc_;
  piece_->errors += event.kind == FlowKind::kError ? 1 : 0;
  piece_->events->push_back(event);
}

void PtStreamDecoder::BeginPiece(PieceRecording* recording, const CycleIndex* cycle_index, bool continuing,
                                 bool need_enable) {
  piece_ = recording;
  piece_seeded_ = false;
  instructions_ = 0;
  last_update_tsc_ = 0;
  image_tsc_ = 0;
  need_enable_ = true;
  need_enable_carried_ = false;
  pending_.valid = false;
  pending_.timed = true;
  unsampled_ = false;
  run_start_ = 0;  // the piece's own first instruction starts its first run
  raise_emitted_ = false;
  cycles_.Clear();
  if (config_.cycles && cycle_index != nullptr) cycles_.Start(cycle_index, 0);
  if (continuing) {
    need_enable_ = need_enable;
    need_enable_carried_ = true;
    // The previous piece's last branch, whatever it is: kUnknown marks it.
    pending_.valid = true;
    pending_.klass = InsnClass::kUnknown;
  }
}

void PtStreamDecoder::EndPiece() { piece_ = nullptr; }

void PtStreamDecoder::RestartPieceHere() {
  if (observer_ != nullptr) {
    fast_cache_.FlushRuns();
    observer_->ForgetRuns();
  }
  piece_->events->clear();
  piece_->errors = 0;
  piece_->time_steps->clear();
  last_update_tsc_ = 0;
  image_tsc_ = 0;
  instructions_ = 0;
  // The stitcher holds the branch pending here, sampled where the piece before ended.
  if (pending_.valid) pending_.klass = InsnClass::kUnknown;
  pending_.timed = true;
  unsampled_ = false;
  // What the part before did with a branch carried into it, or sampled, is not this
  // piece's (a redo may start at an earlier piece's PSB, carrying a branch too).
  piece_->carried_flush = false;
  piece_->sampled_time = false;
  piece_->last_sample = 0;
}

FlowState PtStreamDecoder::SaveState() const {
  return FlowState{instructions_, stats_, need_enable_, pending_};
}

void PtStreamDecoder::RestoreState(const FlowState& state) {
  instructions_ = state.instructions;
  stats_ = state.stats;
  need_enable_ = state.need_enable;
  pending_ = state.pending;
}

void PtStreamDecoder::MarkObservedRuns() {
  if (observer_ == nullptr) return;
  fast_cache_.FlushRuns();
  observer_->MarkRuns();
}

void PtStreamDecoder::ForgetRunsSinceMark() {
  if (observer_ == nullptr) return;
  fast_cache_.FlushRuns();
  observer_->ForgetRunsSinceMark();
}

}  // namespace ptd::decoder
