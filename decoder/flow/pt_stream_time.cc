// PtStreamDecoder's time: the samples its events take (time, instruction and cycles
// axes; a piece logs them for the stitcher), the timing updates, and the process image
// as of the newest event's time.
#include "decoder/flow/pt_stream_decoder.h"

#include <algorithm>

namespace ptd::decoder {

// On the time axis an event's time is known only at the next timing update: the single
// decoder hands out the clock's ticket (its events wait in the clock), a piece logs the
// sample and hands out its index (the stitcher replays the log through a clock).
uint64_t PtStreamDecoder::Now() {
  // Cycles axis: the cycle count (a piece's is relative to its buffer: the stitcher
  // makes it absolute and uses it as the time).
  if (config_.axis == TimeAxis::kCycles) [[unlikely]] {
    return piece_ == nullptr ? clock_.Now(cycles_.last()) : cycles_.last();
  }
  SettleBranchSample();
  return TimeSample(instructions_);
}

// The time when `instructions` had executed (time or instruction axis). On the time axis:
// the clock's ticket, or in a piece the index of the logged step.
uint64_t PtStreamDecoder::TimeSample(uint64_t instructions) {
  if (piece_ == nullptr) {
    return config_.axis == TimeAxis::kTime ? clock_.Sample(instructions) : clock_.Now(instructions);
  }
  return PieceTimeSample(instructions);
}

// Out of line: inlined, its vector growth made every sample save more registers.
uint64_t PtStreamDecoder::PieceTimeSample(uint64_t instructions) {
  if (config_.axis == TimeAxis::kInstructions) {
    piece_->sampled_time = true;
    piece_->last_sample = instructions;
    return instructions;
  }
  return piece_->time_steps->AddSample(instructions);
}

// Most branches are jumps the filter drops, so a branch's time is sampled late: just
// before the clock is used again (another sample, or a new timing update). Taken then,
// it lies between the same two updates as at the branch. A sample's time depends only on
// its instruction count and those two updates, so extra samples (pieces settle at their
// borders too) change nothing.
void PtStreamDecoder::SettleBranchSample() {
  if (!unsampled_) return;
  unsampled_ = false;
  uint64_t time = TimeSample(unsampled_at_);
  if (!pending_.timed) {  // the newest branch (being flushed, or still pending)
    pending_.time = time;
    pending_.timed = true;
  }
}

// `at_event`: the time of an event's own packet in a stream with CYC, a timing point even
// when the TSC did not move since the last update (the instructions since then took no
// time the packets saw: a syscall's TIP.PGD right after the branch before it).
// A piece's first PSB+: the single decoder passes that PSB in flight and takes its TSC
// only where it next reads the time, so for the stitcher this is a time to start from
// when no piece before gave one (TimeSteps::kSeed), not a timing point; the piece's own
// later read of the same TSC is the point, as in the single decoder.
void PtStreamDecoder::SeedPieceTime(uint64_t tsc) {
  if (tsc == 0) return;
  SettleBranchSample();
  piece_->time_steps->AddUpdate(tsc, instructions_, /*at_event=*/false, /*seed=*/true);
}

void PtStreamDecoder::UpdateTime(uint64_t tsc, bool at_event) {
  if (config_.axis != TimeAxis::kTime || tsc == 0 || (tsc == last_update_tsc_ && !at_event)) return;
  last_update_tsc_ = tsc;
  SettleBranchSample();
  if (piece_ == nullptr) {
    clock_.Update(tsc, instructions_, PendingTicket(), at_event);
  } else {
    piece_->time_steps->AddUpdate(tsc, instructions_, at_event);
  }
}

// The image as of an event's time (the timing packets before the event's packet): code
// decoded after the event ran after that time, so mappings made before it are in and
// mappings replaced before it are gone. Not libipt's time after a block: it reads ahead
// (past an execve's TIP.PGD to the TSC of the re-enable, while the block before the
// syscall is still to be decoded). On every time axis: the instruction and cycles axes
// decode replaced code with the bytes of its time too. Pieces stamp each event with
// this time (FlowEvent::image_tsc), so the models see the same image at every event as
// with one decoder (output stays identical with --jobs N).
void PtStreamDecoder::AdvanceImage(uint64_t tsc) {
  if (tsc == 0) return;
  image_tsc_ = std::max(image_tsc_, tsc);
  uint64_t ns = config_.conversion.TscToNs(tsc);
  if (ns >= next_image_change_) {
    fast_cache_.FlushRuns();  // counted in the image as it was
    image::ProcessImage* image = image_clock_->AdvanceTo(ns);
    next_image_change_ = std::max(image_clock_->next_change(), ns + 1);
    if (image != image_ || image_clock_->version() != image_version_) {
      image_version_ = image_clock_->version();
      UseImage(image);
    }
  }
  // Now ns < next_image_change_: the same TSC again changes nothing while that and
  // image_tsc_ stay (ImageUnchangedAt).
  advanced_tsc_ = tsc;
  advanced_next_change_ = next_image_change_;
}

void PtStreamDecoder::UseImage(image::ProcessImage* image) {
  // Even the same image may hold other code now: what was cached by address goes.
  image_ = image;
  classifier_.SetImage(image);
  traps_.SetImage(image);
  pending_range_ = image::FunctionRange();
  ranges_.Clear();
  fast_cache_.Clear();
  if (fast_ != nullptr) fast_->SetImage(image);
  if (image->libipt_image() != libipt_image_) {
    libipt_image_ = image->libipt_image();
    // libipt checks its cached section against the image on every read, so the decoder
    // may switch (or the image change) between two blocks.
    if (set_libipt_image_) set_libipt_image_(libipt_image_);
  }
}

// The clock's ticket the pending branch holds (time axis, single decoder), if any.
uint64_t PtStreamDecoder::PendingTicket() const {
  return pending_.valid && pending_.timed ? pending_.time : TimeInterpolator::kNoTicket;
}

}  // namespace ptd::decoder
