#pragma once
// The decode loop shared by the three flow decoders (flow_decoder.h): sync, drain
// events, next block or instruction, time; after an error the resync remedy. What one
// step yields (a libipt block, a fast block, an instruction) becomes FlowEvents here, and
// the three implementations differ only in their step functions (pt_stream_decoder.cc),
// bound at compile time: the loop is per block, so no virtual call per step.
//
// libipt 2.0.5 quirks handled here: blocks classed ptic_error (classified with Zydis),
// resync after an error that would skip a good PSB segment (sync_set on the first PSB at
// or after the offset of the call before the error), 16+ zero bytes after the buffer
// (the PSB search reads past the end), and -pte_bad_cpu (no errata, with a warning).
// No global state: one object per stream or worker thread, each with its own libipt
// image (pt_image moves the section it finds to the front: not safe to share).

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "decoder/packets/cycle_index.h"
#include "decoder/flow/fast_block_decoder.h"
#include "decoder/flow/flow_decoder.h"
#include "decoder/flow/insn_classifier.h"
#include "decoder/flow/function_range_cache.h"
#include "decoder/flow/trap_scanner.h"
#include "decoder/flow/time_interpolator.h"
#include "image/process_image.h"

struct pt_block;
struct pt_event;
struct pt_image;
struct pt_block_decoder;
struct pt_insn_decoder;

namespace ptd::decoder {

// The state every flow decoder keeps between steps (run starts, the pending branch,
// time, cycles, image) and the loop (RunWith), written once; the implementations pick
// the step functions (pt_stream_decoder.cc, MakeFlowDecoder).
class PtStreamDecoder : public FlowDecoder {
 public:
  PtStreamDecoder(const PtDecodeConfig& config, image::ProcessImage* image, FlowConsumer* consumer);

  absl::Status DecodeChunk(const uint8_t* padded, size_t size, uint64_t base_offset) override;
  void MarkLostData(uint64_t offset) override;

  Stats stats() const override;
  const std::vector<std::string>& warnings() const override { return warnings_; }
  uint64_t instructions() const override { return instructions_; }
  uint64_t last_time() const override { return clock_.last(); }
  uint64_t cycles_total() const override { return cycles_total_; }

  void set_block_observer(BlockObserver* observer) override {
    observer_ = observer;
    fast_cache_.CountRuns(observer != nullptr && observer->counts_runs() ? observer : nullptr);
  }
  void set_image_clock(ImageClock* clock) override { image_clock_ = clock; }
  void set_cancel_flag(const std::atomic<bool>* cancel) override { cancel_ = cancel; }
  void set_progress(std::function<void(uint64_t offset)> progress) override { progress_ = std::move(progress); }
  bool cancelled() const override { return cancelled_; }

  void BeginPiece(PieceRecording* recording, const CycleIndex* cycle_index, bool continuing,
                  bool need_enable) override;
  void EndPiece() override;
  absl::Status DecodeWatched(const PtBuffer& buffer, const DecodeStart& start, PsbWatcher* watcher) override;
  void RestartPieceHere() override;
  void SettleBranchSample() override;
  FlowState SaveState() const override;
  void RestoreState(const FlowState& state) override;
  void MarkObservedRuns() override;
  void ForgetRunsSinceMark() override;

 protected:
  // The loop with one kind of step (one implementation each).
  virtual absl::Status Run(const PtBuffer& buffer, const DecodeStart& start, PsbWatcher* watcher) = 0;
  template <class Api>
  absl::Status RunWith(const PtBuffer& buffer, const DecodeStart& start, PsbWatcher* watcher);

 private:
  friend struct BlockApi;
  friend struct InsnApi;
  friend struct FastApi;

  int NextBlock(pt_block_decoder* decoder);
  int NextFastBlock(FastBlockDecoder* decoder);
  // Whether the fast decoder's next block may be taken by RunQuick: the branch pending
  // now is a jump that stays in its function (it makes no event) to where that block
  // starts, and no per-run work (a new run, OCaml traps) is due.
  bool QuickBlockFollows(const FastBlockDecoder& decoder);
  // HandleBlock for the blocks RunQuick took.
  void HandleQuickRun(const QuickRun& run, const FastBlockDecoder& decoder);
  // What a block (libipt's or the fast decoder's) means to the flow.
  template <class Api>
  void HandleBlock(const pt_block& block, typename Api::Decoder* decoder, bool starts_run);
  template <class Api>
  bool TimeRunStart(typename Api::Decoder* decoder);
  template <class Api>
  void TimeAfterStep(typename Api::Decoder* decoder, bool offset_fresh, uint64_t offset, uint64_t* time_offset);
  int NextInsn(pt_insn_decoder* decoder);
  void OnInstructionRun(uint64_t first_ip, uint64_t count);
  void StartRun(uint64_t first_ip);
  bool ReadNeedEnable();
  void SetPending(InsnClass klass, uint64_t ip, uint64_t size);
  void FlushPending(uint64_t target, bool known);
  bool PendingStaysInFunction(uint64_t target, bool known);
  void HandleEvent(const pt_event& event);
  void Disable(uint64_t ip, bool known);
  void Emit(FlowKind kind, uint64_t target, bool known, uint64_t offset = 0, const char* message = "");
  // To the consumer, or (pieces) to the piece's events stamped with the image time.
  void Deliver(FlowEvent& event);
  // Deliver's piece mode, out of line: the list's encoding inlined into Deliver made its
  // --jobs 1 path save more registers (+19 M instructions on the 60 M walker).
  void RecordInPiece(FlowEvent& event);
  void UpdateTime(uint64_t tsc, bool at_event = false);
  void SeedPieceTime(uint64_t tsc);
  uint64_t PendingTicket() const;
  void AdvanceImage(uint64_t tsc);
  bool ImageUnchangedAt(uint64_t tsc) const;
  void UseImage(image::ProcessImage* image);
  uint64_t Now();
  uint64_t TimeSample(uint64_t instructions);
  [[gnu::noinline]] uint64_t PieceTimeSample(uint64_t instructions);
  void WarnErrata();

  PtDecodeConfig config_;
  image::ProcessImage* image_;
  ImageClock* image_clock_ = nullptr;
  uint64_t next_image_change_ = 0;  // ns; 0: advance at the next timing update
  uint64_t image_version_ = 0;
  pt_image* libipt_image_ = nullptr;  // the one the running libipt decoder uses
  // Gives the running libipt decoder another image (per-CPU streams: another process).
  std::function<void(pt_image*)> set_libipt_image_;
  BlockObserver* observer_ = nullptr;
  const std::atomic<bool>* cancel_ = nullptr;
  std::function<void(uint64_t offset)> progress_;
  bool cancelled_ = false;
  InsnClassifier classifier_;
  // kFast: blocks by start IP, kept across chunks and pieces while the image stays.
  FastBlockCache fast_cache_;
  FastBlockDecoder* fast_ = nullptr;  // the running fast decoder, if any
  PacketQuery::Scan packet_scan_;     // of the buffer being decoded
  TrapScanner traps_;  // OCaml trap push/pop/raise inside runs
  bool errata_ok_ = true;
  bool need_enable_ = true;
  PendingBranch pending_;
  bool raise_emitted_ = false;  // a kRaise not yet followed by a return or jump event
  uint64_t run_start_ = 0;      // first instruction after the last branch (0: not yet seen)
  image::FunctionRange pending_range_;  // function of the last pending jump (cache; UseImage clears it)
  // Functions of recent pending jumps, by the jump's address, and of the targets of the
  // branches quick runs cross (RangeOf is two binary searches: an interpreter's
  // jumps leave their function all the time; UseImage clears it).
  FunctionRangeCache ranges_;
  uint64_t instructions_ = 0;
  uint64_t enable_time_ = 0;  // FlowEvent::enable_time of the kEnable being emitted
  // config.cycles: the current buffer's index, looked up after each libipt step.
  CycleIndex chunk_cycles_;
  CycleCursor cycles_;
  uint64_t cycles_total_ = 0;
  TimeInterpolator clock_;
  // The time axis: the time of each packet of the buffer being decoded (null: the flow
  // decoder's time).
  TimeCursor* time_index_ = nullptr;  // &time_cursor_ on the time axis
  TimeCursor time_cursor_;
  // The last TSC UpdateTime was given: repeats change nothing (the clock ignores them,
  // and so does its replay of a piece's steps).
  uint64_t last_update_tsc_ = 0;
  // The newest branch's time sample, not taken yet (time and instruction axes): at this
  // instruction count.
  bool unsampled_ = false;
  uint64_t unsampled_at_ = 0;
  uint64_t image_tsc_ = 0;  // the newest event TSC (the image's time); pieces: their own
  // The TSC AdvanceImage was last given and next_image_change_ after it (ImageUnchangedAt).
  uint64_t advanced_tsc_ = 0;
  uint64_t advanced_next_change_ = 0;
  // Piece mode: events recorded, time steps logged instead of computed; the carried-in
  // state is a guess until overwritten.
  PieceRecording* piece_ = nullptr;
  bool piece_seeded_ = false;  // the piece's first PSB+ has given its time
  bool need_enable_carried_ = false;
  Stats stats_;  // instructions and undecodable are filled in by stats()
  std::vector<std::string> warnings_;
};

// PacketQuery's scan of a buffer (`padded`: kPtPadding zero bytes after `size`), on
// `threads` threads.
PacketQuery::Scan ScanPacketsForQuery(const uint8_t* padded, size_t size, int threads = 1);

// True when the stream has TSC packets: every PSB+ holds one when TSC is enabled, so the
// first two PSB+ groups (within `limit` bytes) tell.
bool StreamHasTsc(absl::Span<const uint8_t> padded_bytes, size_t size, size_t limit = 1 << 20);

}  // namespace ptd::decoder
