#include "decoder/flow/pt_stream_decoder.h"

#include <intel-pt.h>

#include <algorithm>
#include <concepts>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/pt_psb.h"

namespace ptd::decoder {
namespace {

}  // namespace

PacketQuery::Scan ScanPacketsForQuery(const uint8_t* padded, size_t size, int threads) {
  pt_config c;
  pt_config_init(&c);
  c.begin = const_cast<uint8_t*>(padded);
  c.end = c.begin + size;
  return PacketQuery::ScanBytes(c, threads);
}

bool StreamHasTsc(absl::Span<const uint8_t> padded_bytes, size_t size, size_t limit) {
  return StreamHasPacket(padded_bytes.first(std::min(size, padded_bytes.size())), ppt_tsc, limit, 2);
}

PtStreamDecoder::PtStreamDecoder(const PtDecodeConfig& config, image::ProcessImage* image,
                                 FlowConsumer* consumer)
    : config_(config),
      image_(image),
      classifier_(image),
      traps_(image),
      clock_(config.axis, config.conversion, consumer) {}

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

// True when AdvanceImage(tsc) would change nothing: it was just done for this TSC (a
// syscall's three events carry the same one) and nothing it reads has moved since.
[[gnu::always_inline]] inline bool PtStreamDecoder::ImageUnchangedAt(uint64_t tsc) const {
  return tsc == advanced_tsc_ && next_image_change_ == advanced_next_change_ && tsc <= image_tsc_;
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

void PtStreamDecoder::Emit(FlowKind kind, uint64_t target, bool known, uint64_t offset,
                           const char* message) {
  FlowEvent event;
  event.kind = kind;
  event.target = target;
  event.target_known = known;
  event.instructions = instructions_;
  event.cycles = cycles_.last();
  event.time = Now();
  event.offset = offset;
  event.enable_time = enable_time_;
  event.message = message;
  Deliver(event);
}

void PtStreamDecoder::Deliver(FlowEvent& event) {
  if (piece_ != nullptr) {
    RecordInPiece(event);
  } else {
    clock_.Deliver(event);
  }
}

// The clock's ticket the pending branch holds (time axis, single decoder), if any.
uint64_t PtStreamDecoder::PendingTicket() const {
  return pending_.valid && pending_.timed ? pending_.time : TimeInterpolator::kNoTicket;
}

[[gnu::noinline]] void PtStreamDecoder::RecordInPiece(FlowEvent& event) {
  event.image_tsc = image_tsc_;
  piece_->errors += event.kind == FlowKind::kError ? 1 : 0;
  piece_->events->push_back(event);
}

void PtStreamDecoder::MarkLostData(uint64_t offset) {
  cycles_.Raise(cycles_total_);  // every cycle of the chunks before the gap
  pending_.valid = false;
  need_enable_ = true;
  need_enable_carried_ = false;
  Emit(FlowKind::kLostData, 0, false, offset);
}

void PtStreamDecoder::SetPending(InsnClass klass, uint64_t ip, uint64_t size) {
  pending_.valid = true;
  pending_.klass = klass;
  pending_.ip = ip;
  pending_.fallthrough = ip + size;
  pending_.instructions = instructions_;
  pending_.cycles = cycles_.last();
  if (config_.axis != TimeAxis::kCycles) {
    pending_.timed = false;
    unsampled_ = true;
    unsampled_at_ = instructions_;
  } else {
    pending_.time = Now();
    pending_.timed = true;
  }
  pending_.after_raise = raise_emitted_;
  pending_.run_start = run_start_;
}

namespace {

bool MayStayInFunction(const PendingBranch& pending, bool known) {
  return known && !pending.after_raise &&
         (pending.klass == InsnClass::kJump || pending.klass == InsnClass::kCondJump);
}

// `range` is the function of pending.ip. In a function with inlined calls every jump
// makes an event: the runs between events are then straight, and the call-stack model
// finds where inlined frames begin and end along them.
bool RunAndTargetInside(const image::FunctionRange& range, const PendingBranch& pending, uint64_t target) {
  auto inside = [&](uint64_t a) { return a >= range.start && a < range.end; };
  return range.mapped && !range.plt && !range.inlines && inside(target) && inside(pending.run_start);
}

}  // namespace

bool StaysInFunction(const image::ProcessImage& image, const PendingBranch& pending, uint64_t target, bool known) {
  return MayStayInFunction(pending, known) && RunAndTargetInside(image.RangeOf(pending.ip), pending, target);
}

// StaysInFunction with the function's range kept from one jump to the next.
[[gnu::always_inline]] inline bool PtStreamDecoder::PendingStaysInFunction(uint64_t target, bool known) {
  if (!MayStayInFunction(pending_, known)) return false;
  if (pending_.ip < pending_range_.start || pending_.ip >= pending_range_.end) {
    pending_range_ = ranges_.At(*image_, pending_.ip);
  }
  return RunAndTargetInside(pending_range_, pending_, target);
}

[[gnu::always_inline]] inline void PtStreamDecoder::FlushPending(uint64_t target, bool known) {
  if (!pending_.valid) return;
  pending_.valid = false;
  if (PendingStaysInFunction(target, known)) return;
  if (!pending_.timed) SettleBranchSample();
  FlowEvent event;
  if (PendingEvent(pending_, target, known, &event)) {
    if (event.kind == FlowKind::kReturn || event.kind == FlowKind::kJump) raise_emitted_ = false;
    Deliver(event);
  } else if (pending_.klass == InsnClass::kUnknown && piece_ != nullptr) {
    // The previous piece's last branch (kUnknown marks it): the stitcher flushes it here.
    piece_->carried_flush = true;
    piece_->carried_flush_index = piece_->events->size();
    piece_->carried_flush_target = target;
    piece_->carried_flush_known = known;
  }
}

// need_enable_ as the single decoder would have it; a piece that starts by continuing
// the previous one only guesses it until it is first overwritten.
bool PtStreamDecoder::ReadNeedEnable() {
  if (need_enable_carried_ && piece_ != nullptr) piece_->used_carried_need_enable = true;
  return need_enable_;
}

void PtStreamDecoder::StartRun(uint64_t first_ip) {
  bool enable = ReadNeedEnable();
  need_enable_carried_ = false;
  if (enable) {
    pending_.valid = false;
    need_enable_ = false;
    Emit(FlowKind::kEnable, first_ip, true);
  } else {
    FlushPending(first_ip, true);
  }
}

// The start of a run of instructions at `first_ip`: either tracing (re)starts here or the
// previous branch went here.
[[gnu::always_inline]] inline void PtStreamDecoder::OnInstructionRun(uint64_t first_ip, uint64_t count) {
  if (need_enable_ || need_enable_carried_) [[unlikely]] {
    StartRun(first_ip);
    run_start_ = first_ip;
  } else {
    // A block cut by an event (PSB+, timing) continues the run; a branch starts a new one.
    if (pending_.valid || run_start_ == 0) run_start_ = first_ip;
    FlushPending(first_ip, true);
  }
  // OCaml exception traps inside the run, each with its own instruction count.
  for (const TrapMark& mark : traps_.Scan(first_ip, count)) {
    instructions_ += mark.index + 1;
    Emit(mark.kind, mark.ip, true);
    if (mark.kind == FlowKind::kRaise) raise_emitted_ = true;
    instructions_ -= mark.index + 1;
  }
  instructions_ += count;
}

// Tracing stops; the pending branch went to `ip` (unknown when not `known`).
void PtStreamDecoder::Disable(uint64_t ip, bool known) {
  FlushPending(ip, known);
  if (!ReadNeedEnable()) Emit(FlowKind::kDisable, 0, false);
  need_enable_ = false;
  need_enable_carried_ = false;
}

void PtStreamDecoder::HandleEvent(const pt_event& event) {
  // The update first: the events waiting for it go on before the image moves on.
  // With CYC every packet has its own time: an event's is a timing point even unchanged.
  // Without, an unchanged time says only that no timing packet came since.
  if (event.has_tsc) UpdateTime(event.tsc, /*at_event=*/config_.cycles);
  if (event.has_tsc && image_clock_ != nullptr && !ImageUnchangedAt(event.tsc)) AdvanceImage(event.tsc);
  switch (event.type) {
    case ptev_enabled:
      pending_.valid = false;
      need_enable_ = false;
      need_enable_carried_ = false;
      if (event.has_tsc && config_.axis == TimeAxis::kTime) enable_time_ = config_.conversion.TscToNs(event.tsc);
      Emit(FlowKind::kEnable, event.variant.enabled.ip, true);
      enable_time_ = 0;
      break;
    case ptev_disabled:
      Disable(event.variant.disabled.ip, !event.ip_suppressed);
      break;
    case ptev_async_disabled:
      Disable(event.variant.async_disabled.at, true);
      break;
    case ptev_async_branch:
      FlushPending(event.variant.async_branch.from, true);
      break;
    case ptev_overflow: {
      pending_.valid = false;
      Emit(FlowKind::kOverflow, 0, false);
      need_enable_ = true;
      need_enable_carried_ = false;
      if (!event.ip_suppressed) {
        need_enable_ = false;
        Emit(FlowKind::kEnable, event.variant.overflow.ip, true);
      }
      break;
    }
    default:
      break;
  }
}

namespace {

// pt_config for one chunk: errata from the recording CPU, timing from meta.json.
pt_config MakeConfig(const PtDecodeConfig& config, const uint8_t* begin, size_t size, bool* errata_ok) {
  pt_config c;
  pt_config_init(&c);
  c.begin = const_cast<uint8_t*>(begin);
  c.end = c.begin + size;
  if (config.cpu.vendor == "intel") {
    c.cpu.vendor = pcv_intel;
    c.cpu.family = static_cast<uint16_t>(config.cpu.family);
    c.cpu.model = static_cast<uint8_t>(config.cpu.model);
    c.cpu.stepping = static_cast<uint8_t>(config.cpu.stepping);
    if (pt_cpu_errata(&c.errata, &c.cpu) < 0) {
      // 2.0.5 does not know newer models: decode without errata.
      std::memset(&c.errata, 0, sizeof c.errata);
      *errata_ok = false;
    }
  }
  c.cpuid_0x15_eax = config.pt.cpuid_0x15_eax;
  c.cpuid_0x15_ebx = config.pt.cpuid_0x15_ebx;
  c.nom_freq = static_cast<uint8_t>(config.pt.nom_freq);
  c.mtc_freq = static_cast<uint8_t>(config.pt.mtc_freq);
  // A union: these bits mean other things (tick events) to the instruction decoder.
  if (config.kind != DecoderKind::kInsn) {
    c.flags.variant.block.end_on_call = 1;
    c.flags.variant.block.end_on_jump = 1;
  }
  return c;
}

// Where to resynchronize after an error: the first PSB at or after the position of the
// call before the failing one (2.0.5's sync_forward would start after its read-ahead and
// can skip a whole good segment), but always past the last sync point.
bool NextSyncPoint(const std::vector<uint64_t>& psbs, uint64_t previous_call, uint64_t last_sync,
                   bool synced_once, uint64_t* out) {
  uint64_t from = previous_call;
  if (synced_once && from <= last_sync) from = last_sync + 1;
  auto it = std::lower_bound(psbs.begin(), psbs.end(), from);
  if (it == psbs.end()) return false;
  *out = *it;
  return true;
}

// A PSB+ status update bound to the IP where the PSB was taken (tracing on): the single
// decoder has run every instruction before that PSB when it reports it.
bool IsPsbAnchor(const pt_event& event) {
  if (!event.status_update) return false;
  switch (event.type) {
    case ptev_exec_mode:
    case ptev_async_paging:
    case ptev_async_vmcs:
      return true;
    case ptev_tsx:
      return !event.ip_suppressed;
    default:
      return false;
  }
}

// How often (in loop steps) the cancel flag is looked at (and progress reported).
constexpr uint32_t kCancelCheckInterval = 4096;

}  // namespace

// The flow decoders (libipt's block and instruction decoders, the fast one) differ only
// in their function names and in what one step yields (a block or an instruction); the
// loop around them is written once, in RunWith, against this interface.
template <class Api>
concept FlowDecoderApi = requires(typename Api::Decoder* d, const typename Api::Decoder* cd, PtStreamDecoder* self,
                                  const pt_config* c, pt_image* image, uint64_t* u64, uint32_t* u32, pt_event* ev) {
  { Api::Alloc(self, c) } -> std::same_as<typename Api::Decoder*>;
  Api::Free(d);
  { Api::SetImage(d, image) } -> std::same_as<int>;
  { Api::SyncForward(d) } -> std::same_as<int>;
  { Api::SyncSet(d, uint64_t{0}) } -> std::same_as<int>;
  { Api::SyncContinue(d, uint64_t{0}) } -> std::same_as<int>;
  { Api::GetOffset(cd, u64) } -> std::same_as<int>;
  { Api::GetSyncOffset(cd, u64) } -> std::same_as<int>;
  { Api::Time(d, u64, u32, u32) } -> std::same_as<int>;
  { Api::Event(d, ev) } -> std::same_as<int>;
  { Api::Next(self, d) } -> std::same_as<int>;
};

// libipt's block and instruction decoders: the same calls under other names.
template <class D, D* (*kAlloc)(const pt_config*), void (*kFree)(D*), int (*kSetImage)(D*, pt_image*),
          int (*kSyncForward)(D*), int (*kSyncSet)(D*, uint64_t), int (*kGetOffset)(const D*, uint64_t*),
          int (*kGetSyncOffset)(const D*, uint64_t*), int (*kTime)(D*, uint64_t*, uint32_t*, uint32_t*),
          int (*kEvent)(D*, pt_event*, size_t)>
struct LibiptApi {
  using Decoder = D;
  static Decoder* Alloc(PtStreamDecoder*, const pt_config* c) { return kAlloc(c); }
  static void Free(Decoder* d) { kFree(d); }
  static int SetImage(Decoder* d, pt_image* image) { return kSetImage(d, image); }
  static int SyncForward(Decoder* d) { return kSyncForward(d); }
  static int SyncSet(Decoder* d, uint64_t offset) { return kSyncSet(d, offset); }
  // libipt's decoders cannot take a calibration: they start it afresh.
  static int SyncContinue(Decoder* d, uint64_t offset) { return kSyncSet(d, offset); }
  static int GetOffset(const Decoder* d, uint64_t* offset) { return kGetOffset(d, offset); }
  static int GetSyncOffset(const Decoder* d, uint64_t* offset) { return kGetSyncOffset(d, offset); }
  static int Time(Decoder* d, uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) {
    return kTime(d, tsc, lost_mtc, lost_cyc);
  }
  static int Event(Decoder* d, pt_event* event) { return kEvent(d, event, sizeof *event); }
};

struct BlockApi : LibiptApi<pt_block_decoder, pt_blk_alloc_decoder, pt_blk_free_decoder, pt_blk_set_image,
                            pt_blk_sync_forward, pt_blk_sync_set, pt_blk_get_offset, pt_blk_get_sync_offset,
                            pt_blk_time, pt_blk_event> {
  static int Next(PtStreamDecoder* self, Decoder* d) { return self->NextBlock(d); }
  static constexpr const char* kAllocName = "pt_blk_alloc_decoder";
};

struct InsnApi : LibiptApi<pt_insn_decoder, pt_insn_alloc_decoder, pt_insn_free_decoder, pt_insn_set_image,
                           pt_insn_sync_forward, pt_insn_sync_set, pt_insn_get_offset, pt_insn_get_sync_offset,
                           pt_insn_time, pt_insn_event> {
  static int Next(PtStreamDecoder* self, Decoder* d) { return self->NextInsn(d); }
  static constexpr const char* kAllocName = "pt_insn_alloc_decoder";
};

struct FastApi {
  using Decoder = FastBlockDecoder;
  static Decoder* Alloc(PtStreamDecoder* self, const pt_config* c) {
    auto* d = new FastBlockDecoder(*c, &self->fast_cache_, self->image_,
                                   PacketQuery::Accepts(*c, self->packet_scan_) ? &self->packet_scan_ : nullptr,
                                   self->config_.section_blocks);
    if (!d->ok()) {
      delete d;
      return nullptr;
    }
    self->fast_ = d;
    return d;
  }
  // The decoder reads code through the ProcessImage (UseImage hands it the new one).
  static int SetImage(Decoder*, pt_image*) { return 0; }
  static int SyncForward(Decoder* d) { return d->SyncForward(); }
  static int SyncSet(Decoder* d, uint64_t offset) { return d->SyncSet(offset); }
  static int SyncContinue(Decoder* d, uint64_t offset) { return d->SyncContinue(offset); }
  static int GetOffset(const Decoder* d, uint64_t* offset) { return d->GetOffset(offset); }
  static int GetSyncOffset(const Decoder* d, uint64_t* offset) { return d->GetSyncOffset(offset); }
  static int Time(Decoder* d, uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) {
    return d->Time(tsc, lost_mtc, lost_cyc);
  }
  static int Event(Decoder* d, pt_event* event) { return d->Event(event); }
  static int Next(PtStreamDecoder* self, Decoder* d) { return self->NextFastBlock(d); }
  static void Free(Decoder* d) { delete d; }
  static constexpr const char* kAllocName = "pt_qry_alloc_decoder";
};

static_assert(FlowDecoderApi<BlockApi> && FlowDecoderApi<InsnApi> && FlowDecoderApi<FastApi>);

// A run that (re)starts tracing is timed where it starts: how far the query decoder
// reads ahead for the block depends on libipt's block cache, which differs between the
// single decoder and the parallel pieces' decoders. True: this step starts a run (the
// cycles were looked up before it).
template <class Api>
[[gnu::always_inline]] inline bool PtStreamDecoder::TimeRunStart(typename Api::Decoder* decoder) {
  const bool starts_run = cycles_.active() && (need_enable_ || need_enable_carried_);
  uint64_t offset = 0;
  if (starts_run && Api::GetOffset(decoder, &offset) >= 0) [[unlikely]] cycles_.At(offset);
  return starts_run;
}

template <class Api>
[[gnu::always_inline]] inline void PtStreamDecoder::HandleBlock(const pt_block& block, typename Api::Decoder* decoder,
                                                                bool starts_run) {
  // Where the query decoder stands: the packets this block consumed are behind it.
  uint64_t offset = 0;
  const bool timed = cycles_.active() && Api::GetOffset(decoder, &offset) >= 0;
  if (timed && !starts_run) [[unlikely]] cycles_.At(offset);
  if (block.ninsn > 0) {
    stats_.Add(Stat::kBlocks);
    OnInstructionRun(block.ip, block.ninsn);
  }
  if (timed && starts_run) [[unlikely]] cycles_.At(offset);
  if (block.ninsn > 0) {
    if (observer_ != nullptr) observer_->OnBlock(block.ip, block.end_ip, block.ninsn);
    InsnClass klass = FromLibipt(block.iclass);
    if (klass == InsnClass::kUnknown) {
      InsnInfo info = block.truncated ? classifier_.ClassifyBytes(block.raw, block.size, block.end_ip)
                                      : classifier_.Classify(block.end_ip);
      klass = info.klass;
    }
    if (klass != InsnClass::kOther && klass != InsnClass::kUnknown) {
      uint64_t insn_size = 0;
      if (klass == InsnClass::kCall || klass == InsnClass::kFarCall) {
        // The fast decoder's blocks always carry their last instruction's size (libipt's
        // only when truncated): no second decode of the call.
        const bool size_known = std::is_same_v<Api, FastApi> || block.truncated;
        insn_size = size_known ? block.size : classifier_.Classify(block.end_ip).size;
      }
      SetPending(klass, block.end_ip, insn_size);
    }
  }
}

// After a step: libipt's time changes only with packets read, so an unchanged offset
// means an unchanged time (most blocks read no packet).
template <class Api>
[[gnu::always_inline]] inline void PtStreamDecoder::TimeAfterStep(typename Api::Decoder* decoder, bool offset_fresh,
                                                                  uint64_t offset, uint64_t* time_offset) {
  if (config_.axis != TimeAxis::kTime || (offset_fresh && offset == *time_offset)) return;
  *time_offset = offset_fresh ? offset : UINT64_MAX;
  uint64_t tsc = 0;
  uint32_t lost_mtc = 0, lost_cyc = 0;
  if (time_index_ != nullptr && offset_fresh) {
    // The index has no time for events (each brings its own): a branch packet before
    // the last event's is no news.
    const uint64_t at = time_index_->At(offset);
    if (at > last_update_tsc_) UpdateTime(at);
  } else if (Api::Time(decoder, &tsc, &lost_mtc, &lost_cyc) >= 0) {
    UpdateTime(tsc);
  }
}

// One block. An error can come with the instructions decoded before it: they count.
int PtStreamDecoder::NextBlock(pt_block_decoder* decoder) {
  const bool starts_run = TimeRunStart<BlockApi>(decoder);
  pt_block block;
  int status = pt_blk_next(decoder, &block, sizeof block);
  HandleBlock<BlockApi>(block, decoder, starts_run);
  return status;
}

int PtStreamDecoder::NextFastBlock(FastBlockDecoder* decoder) {
  const bool starts_run = TimeRunStart<FastApi>(decoder);
  pt_block block;
  int status = decoder->Next(&block);
  HandleBlock<FastApi>(block, decoder, starts_run);
  return status;
}

[[gnu::always_inline]] inline bool PtStreamDecoder::QuickBlockFollows(const FastBlockDecoder& decoder) {
  if (!pending_.valid || need_enable_ || need_enable_carried_ || image_->has_ocaml()) return false;
  // It leaves the function's range in pending_range_ (RunQuick's bounds).
  return PendingStaysInFunction(decoder.ip(), true);
}

// What HandleBlock (with OnInstructionRun and FlushPending) does for each block of such
// a run: a jump that stayed in its function is dropped, a run starts at each block, and
// the last block's branch is pending next. A crossed call, return or jump is pending at
// its block's end (its cycles those at its offset) and flushed by the block at its
// target (which makes its event, or drops a jump that stays in its own function).
[[gnu::always_inline]] inline void PtStreamDecoder::HandleQuickRun(const QuickRun& run,
                                                                   const FastBlockDecoder& decoder) {
  const uint64_t base = instructions_;
  pending_.valid = false;
  uint32_t crossed = 0;
  for (uint32_t i = 0; i < run.crossed_count; ++i) {
    const QuickRun::Crossed& c = run.crossed[i];
    if (cycles_.active()) [[unlikely]] cycles_.At(c.offset);
    instructions_ = base + c.instructions;
    run_start_ = c.block_ip;
    SetPending(FromLibipt(c.iclass), c.end_ip, c.iclass == ptic_call ? c.size : 0);
    if (c.tsc != 0) UpdateTime(c.tsc);  // TimeAfterStep's, after the block
    // The last block's branch stays pending (the next step flushes it).
    if (run.ends_crossed && i + 1 == run.crossed_count) break;
    crossed += c.crossed ? 1 : 0;
    run_start_ = c.target;
    FlushPending(c.target, true);
  }
  stats_.Add(Stat::kBlocks, run.blocks);
  stats_.Add(Stat::kTraceletBlocks, run.tracelet_blocks);
  stats_.Add(Stat::kCrossedBranches, crossed);
  if (observer_ != nullptr && !fast_cache_.counts_runs()) observer_->OnBlock(run.last_ip, run.last_end_ip, run.last_ninsn);
  if (run.ends_crossed) return;
  uint64_t offset = 0;
  if (cycles_.active() && decoder.GetOffset(&offset) >= 0) [[unlikely]] cycles_.At(offset);
  instructions_ = base + run.instructions;
  run_start_ = run.last_ip;
  SetPending(FromLibipt(run.last_class), run.last_end_ip, run.last_class == ptic_call ? run.last_size : 0);
}

int PtStreamDecoder::NextInsn(pt_insn_decoder* decoder) {
  // Timed as NextBlock does.
  const bool starts_run = cycles_.active() && (need_enable_ || need_enable_carried_);
  uint64_t offset = 0;
  if (starts_run && pt_insn_get_offset(decoder, &offset) >= 0) [[unlikely]] cycles_.At(offset);
  pt_insn insn;
  int status = pt_insn_next(decoder, &insn, sizeof insn);
  if (status < 0) return status;
  const bool timed = cycles_.active() && pt_insn_get_offset(decoder, &offset) >= 0;
  if (timed && !starts_run) [[unlikely]] cycles_.At(offset);
  OnInstructionRun(insn.ip, 1);
  if (timed && starts_run) [[unlikely]] cycles_.At(offset);
  if (observer_ != nullptr) observer_->OnBlock(insn.ip, insn.ip, 1);
  InsnClass klass = FromLibipt(insn.iclass);
  if (klass != InsnClass::kOther && klass != InsnClass::kUnknown) {
    stats_.Add(Stat::kBlocks);
    SetPending(klass, insn.ip, insn.size);
  }
  return status;
}

void PtStreamDecoder::WarnErrata() {
  if (errata_ok_) {
    errata_ok_ = false;
    warnings_.push_back(absl::StrFormat("libipt 2.0.5 does not know cpu %d/%d/%d: decoding without errata",
                                        config_.cpu.family, config_.cpu.model, config_.cpu.stepping));
  }
}

// The decode loop: sync, drain events, next block/instruction, time; after an error the
// resync remedy. A watcher (the piece protocol) may start it mid-buffer and stop it at
// a PSB.
template <class Api>
absl::Status PtStreamDecoder::RunWith(const PtBuffer& buffer, const DecodeStart& start, PsbWatcher* watcher) {
  bool errata_ok = true;
  pt_config c = MakeConfig(config_, buffer.padded, buffer.size, &errata_ok);
  if (!errata_ok) WarnErrata();
  packet_scan_ = buffer.packet_scan;
  typename Api::Decoder* decoder = Api::Alloc(this, &c);
  if (decoder == nullptr) return absl::InternalError(absl::StrCat(Api::kAllocName, " failed"));
  next_image_change_ = 0;  // the first timing update places the image (a redo may go back)
  time_index_ = config_.axis == TimeAxis::kTime && buffer.times != nullptr ? &buffer.times->Get(c) : nullptr;
  libipt_image_ = image_->libipt_image();
  set_libipt_image_ = [decoder](pt_image* image) { Api::SetImage(decoder, image); };
  Api::SetImage(decoder, libipt_image_);

  const bool watching = watcher != nullptr && watcher->watches_psbs();
  SyncState sync = start.sync;
  // A piece that starts where the single decoder passes in flight keeps its time
  // calibration (CYC times as that decoder's).
  int status = start.kind == DecodeStart::Kind::kSyncForward ? Api::SyncForward(decoder)
               : start.kind == DecodeStart::Kind::kContinue  ? Api::SyncContinue(decoder, start.psb)
                                                             : Api::SyncSet(decoder, start.psb);
  bool continuing = start.kind == DecodeStart::Kind::kContinue;
  bool sync_carried = continuing;  // the remedy's state is still the one carried in
  uint32_t until_cancel_check = kCancelCheckInterval;
  bool stopped = false;
  while (true) {
    if (status < 0) break;  // no (further) PSB
    if (continuing) {
      // The single decoder meets this PSB in flight: its PSB+ is status updates only.
      continuing = false;
    } else {
      Api::GetSyncOffset(decoder, &sync.sync_offset);
      sync.synced_once = true;
      if (config_.axis == TimeAxis::kTime) {
        // The PSB+ just read carries the TSC: the segment's first events need it.
        uint64_t tsc = 0;
        uint32_t lost_mtc = 0, lost_cyc = 0;
        uint64_t at = 0;
        const bool indexed = time_index_ != nullptr && Api::GetOffset(decoder, &at) >= 0;
        if (indexed) tsc = time_index_->At(at);
        if (indexed || Api::Time(decoder, &tsc, &lost_mtc, &lost_cyc) >= 0) {
          if (piece_ != nullptr && !piece_seeded_) {
            SeedPieceTime(tsc);
          } else {
            UpdateTime(tsc);
          }
        }
        piece_seeded_ = true;
      }
      stats_.Add(Stat::kSyncs);
      need_enable_ = true;
      need_enable_carried_ = false;
      pending_.valid = false;
      sync.previous_call = sync.sync_offset;
      sync_carried = false;
    }
    // The decoder's offset after the last block, while no event has moved it since; and
    // the offset of the last time query: libipt's time changes only with packets read,
    // so an unchanged offset means an unchanged time (most blocks read no packet).
    bool offset_fresh = false;
    uint64_t offset_after_block = 0;
    uint64_t time_offset = UINT64_MAX;
    while (true) {
      while (status & pts_event_pending) {
        offset_fresh = false;
        time_offset = UINT64_MAX;
        // Tracing off and a watched PSB read: nothing left to run before it.
        if (watching && (status & pts_ip_suppressed)) {
          uint64_t at = 0;
          if (Api::GetOffset(decoder, &at) >= 0 && watcher->AtPsb(at, sync)) {
            stopped = true;
            break;
          }
        }
        pt_event event;
        status = Api::Event(decoder, &event);
        if (status < 0) break;
        if (cycles_.active()) [[unlikely]] {
          uint64_t at = 0;
          if (Api::GetOffset(decoder, &at) >= 0) cycles_.At(at);
        }
        // A PSB+ bound at its IP: every instruction before that PSB has run.
        if (watching && IsPsbAnchor(event)) {
          uint64_t at = 0;
          if (Api::GetOffset(decoder, &at) >= 0 && watcher->AtPsb(at, sync)) {
            stopped = true;
            break;
          }
        }
        HandleEvent(event);
      }
      if (stopped || status < 0) break;
      if (offset_fresh) {
        sync.previous_call = offset_after_block;
      } else {
        Api::GetOffset(decoder, &sync.previous_call);
      }
      sync_carried = false;
      if ((cancel_ != nullptr || progress_) && --until_cancel_check == 0) {
        until_cancel_check = kCancelCheckInterval;
        if (progress_) progress_(sync.previous_call);
        if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
          cancelled_ = true;
          break;
        }
      }
      status = Api::Next(this, decoder);
      if (status < 0) break;
      offset_fresh = Api::GetOffset(decoder, &offset_after_block) >= 0;
      TimeAfterStep<Api>(decoder, offset_fresh, offset_after_block, &time_offset);
      if constexpr (std::is_same_v<Api, FastApi>) {
        // The blocks that make no event, many at a time, as the steps above would take
        // them (the same previous_call, cancel check and time after each), but cheaper.
        while (!(status & pts_event_pending) && offset_fresh && decoder->CanRunQuick() && QuickBlockFollows(*decoder)) {
          QuickRun run;
          run.lo = pending_range_.start;
          run.hi = pending_range_.end;
          // One block at a time where each is looked at in order (an observer that does
          // not count runs: FastBlockCache::CountRuns). Cycles need no look
          // inside a run: no event comes from it, and the cursor's value at the run's end
          // (HandleQuickRun) is the last block's (it never decreases with the offset).
          run.max_blocks = observer_ != nullptr && !fast_cache_.counts_runs() ? 1 : UINT32_MAX;
          run.ranges = &ranges_;
          run.watch_time = config_.axis == TimeAxis::kTime;
          run.tsc = last_update_tsc_;
          run.times = time_index_;
          if (cancel_ != nullptr || progress_) {
            if (until_cancel_check == 1) break;  // the loop above checks
            run.max_blocks = std::min(run.max_blocks, until_cancel_check - 1);
          }
          status = decoder->RunQuick(offset_after_block, &run);
          if (run.blocks == 0) break;
          if (cancel_ != nullptr || progress_) until_cancel_check -= run.blocks;
          sync.previous_call = run.offset_before_last;
          HandleQuickRun(run, *decoder);
          if (status < 0) break;
          offset_fresh = Api::GetOffset(decoder, &offset_after_block) >= 0;
          TimeAfterStep<Api>(decoder, offset_fresh, offset_after_block, &time_offset);
        }
        if (status < 0) break;
      }
    }
    if (stopped || cancelled_ || status == -pte_eos) break;
    if (watcher != nullptr && watcher->EndsAtError(sync_carried)) break;
    uint64_t error_offset = 0;
    Api::GetOffset(decoder, &error_offset);
    pending_.valid = false;
    Emit(FlowKind::kError, 0, false, buffer.base_offset + error_offset, pt_errstr(pt_errcode(status)));
    uint64_t next = 0;
    if (!NextSyncPoint(*buffer.psbs, sync.previous_call, sync.sync_offset, sync.synced_once, &next)) break;
    if (watcher != nullptr && watcher->StopsBeforeResync(next)) break;
    status = Api::SyncSet(decoder, next);
    if (status < 0) break;
  }
  if (watcher != nullptr) {
    watcher->AtEnd(sync);
  } else {
    SettleBranchSample();  // the clock's last time includes the last branch's
  }
  fast_cache_.FlushRuns();
  set_libipt_image_ = nullptr;
  fast_ = nullptr;
  time_index_ = nullptr;
  Api::Free(decoder);
  return absl::OkStatus();
}

Stats PtStreamDecoder::stats() const {
  Stats stats = stats_;
  stats.Set(Stat::kInstructions, instructions_);
  stats.Set(Stat::kUndecodable, classifier_.undecodable());
  stats.Set(Stat::kFastRunsShared, fast_cache_.runs_shared());
  stats.Set(Stat::kFastRunsDecoded, fast_cache_.runs_decoded());
  return stats;
}

absl::Status PtStreamDecoder::DecodeChunk(const uint8_t* padded, size_t size, uint64_t base_offset) {
  stats_.Add(Stat::kBytes, size);
  std::vector<uint64_t> psbs = FindPsbOffsets(absl::MakeConstSpan(padded, size));
  PacketQuery::Scan scan;
  if (config_.kind == DecoderKind::kFast) scan = ScanPacketsForQuery(padded, size);
  if (config_.cycles) {
    // This chunk's cycles continue from the chunks before it.
    chunk_cycles_ = scan.cycles != nullptr ? std::move(*scan.cycles) : CycleIndex::Build(padded, size);
    cycles_.Start(&chunk_cycles_, cycles_total_);
    cycles_total_ += chunk_cycles_.total();
  }
  need_enable_ = true;
  pending_.valid = false;
  std::shared_ptr<SharedTimeIndex> times;
  if (config_.axis == TimeAxis::kTime) times = std::make_shared<SharedTimeIndex>();
  absl::Status status = Run(PtBuffer{padded, size, base_offset, &psbs, scan, times}, DecodeStart(), nullptr);
  // No later update times what is left of the chunk (the stitcher does the same).
  clock_.Finish(PendingTicket());
  return status;
}

absl::Status PtStreamDecoder::DecodeWatched(const PtBuffer& buffer, const DecodeStart& start, PsbWatcher* watcher) {
  return Run(buffer, start, watcher);
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

namespace {

// An implementation: the loop over one kind of step.
template <class Api>
class StepFlowDecoder final : public PtStreamDecoder {
 public:
  using PtStreamDecoder::PtStreamDecoder;

 protected:
  absl::Status Run(const PtBuffer& buffer, const DecodeStart& start, PsbWatcher* watcher) override {
    return RunWith<Api>(buffer, start, watcher);
  }
};

}  // namespace

std::unique_ptr<FlowDecoder> MakeFlowDecoder(const PtDecodeConfig& config, image::ProcessImage* image,
                                             FlowConsumer* consumer) {
  switch (config.kind) {
    case DecoderKind::kFast: return std::make_unique<StepFlowDecoder<FastApi>>(config, image, consumer);
    case DecoderKind::kBlock: return std::make_unique<StepFlowDecoder<BlockApi>>(config, image, consumer);
    case DecoderKind::kInsn: break;
  }
  return std::make_unique<StepFlowDecoder<InsnApi>>(config, image, consumer);
}

}  // namespace ptd::decoder
