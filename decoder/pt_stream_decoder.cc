#include "decoder/pt_stream_decoder.h"

#include <intel-pt.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace ptd::decoder {
namespace {

constexpr uint8_t kPsbPattern[16] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                     0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};

InsnClass FromLibipt(enum pt_insn_class klass) {
  switch (klass) {
    case ptic_other: return InsnClass::kOther;
    case ptic_call: return InsnClass::kCall;
    case ptic_return: return InsnClass::kReturn;
    case ptic_jump: return InsnClass::kJump;
    case ptic_cond_jump: return InsnClass::kCondJump;
    case ptic_far_call: return InsnClass::kFarCall;
    case ptic_far_return: return InsnClass::kFarReturn;
    case ptic_far_jump: return InsnClass::kFarJump;
    default: return InsnClass::kUnknown;
  }
}

}  // namespace

std::vector<uint64_t> FindPsbOffsets(absl::Span<const uint8_t> bytes) {
  std::vector<uint64_t> offsets;
  const uint8_t* begin = bytes.data();
  const uint8_t* end = begin + bytes.size();
  const uint8_t* at = begin;
  while (true) {
    at = std::search(at, end, kPsbPattern, kPsbPattern + sizeof kPsbPattern);
    if (at == end) break;
    offsets.push_back(static_cast<uint64_t>(at - begin));
    at += sizeof kPsbPattern;
  }
  return offsets;
}

bool StreamHasTsc(absl::Span<const uint8_t> padded_bytes, size_t size, size_t limit) {
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t*>(padded_bytes.data());
  config.end = config.begin + std::min(size, padded_bytes.size());
  pt_packet_decoder* decoder = pt_pkt_alloc_decoder(&config);
  if (decoder == nullptr) return false;
  bool found = false;
  if (pt_pkt_sync_forward(decoder) >= 0) {
    pt_packet packet;
    uint64_t offset = 0;
    while (pt_pkt_next(decoder, &packet, sizeof packet) >= 0) {
      if (packet.type == ppt_tsc) {
        found = true;
        break;
      }
      if (pt_pkt_get_offset(decoder, &offset) < 0 || offset > limit) break;
    }
  }
  pt_pkt_free_decoder(decoder);
  return found;
}

PtStreamDecoder::PtStreamDecoder(const PtDecodeConfig& config, image::ProcessImage* image,
                                 FlowConsumer* consumer)
    : config_(config), image_(image), consumer_(consumer), classifier_(image) {}

uint64_t PtStreamDecoder::Now() {
  if (config_.axis == TimeAxis::kInstructions || !have_time_) {
    last_time_ = std::max(last_time_, config_.axis == TimeAxis::kInstructions ? instructions_ : last_time_);
    return last_time_;
  }
  // Between timing packets, time advances with the instructions executed.
  double t = static_cast<double>(time_base_ns_) +
             ns_per_insn_ * static_cast<double>(instructions_ - time_base_insns_);
  uint64_t now = static_cast<uint64_t>(t);
  last_time_ = std::max(last_time_, now);
  return last_time_;
}

void PtStreamDecoder::UpdateTime(uint64_t tsc) {
  if (config_.axis != TimeAxis::kTime || tsc == 0 || tsc == last_tsc_) return;
  last_tsc_ = tsc;
  uint64_t ns = config_.conversion.TscToNs(tsc);
  if (have_time_ && ns > time_base_ns_ && instructions_ > time_base_insns_) {
    ns_per_insn_ = static_cast<double>(ns - time_base_ns_) /
                   static_cast<double>(instructions_ - time_base_insns_);
  }
  if (!have_time_ || ns > time_base_ns_) {
    time_base_ns_ = ns;
    time_base_insns_ = instructions_;
  }
  have_time_ = true;
}

void PtStreamDecoder::Emit(FlowKind kind, uint64_t target, bool known, uint64_t offset,
                           const char* message) {
  FlowEvent event;
  event.kind = kind;
  event.target = target;
  event.target_known = known;
  event.instructions = instructions_;
  event.time = Now();
  event.offset = offset;
  event.message = message;
  consumer_->OnFlow(event);
}

void PtStreamDecoder::MarkLostData(uint64_t offset) {
  pending_.valid = false;
  need_enable_ = true;
  Emit(FlowKind::kLostData, 0, false, offset);
}

void PtStreamDecoder::SetPending(InsnClass klass, uint64_t ip, uint64_t size) {
  pending_.valid = true;
  pending_.klass = klass;
  pending_.ip = ip;
  pending_.fallthrough = ip + size;
  pending_.instructions = instructions_;
  pending_.time = Now();
}

void PtStreamDecoder::FlushPending(uint64_t target, bool known) {
  if (!pending_.valid) return;
  pending_.valid = false;
  FlowEvent event;
  event.ip = pending_.ip;
  event.target = target;
  event.target_known = known;
  event.fallthrough = pending_.fallthrough;
  event.instructions = pending_.instructions;
  event.time = pending_.time;
  switch (pending_.klass) {
    case InsnClass::kCall: event.kind = FlowKind::kCall; break;
    case InsnClass::kReturn: event.kind = FlowKind::kReturn; break;
    case InsnClass::kFarCall: event.kind = FlowKind::kSyscall; break;
    case InsnClass::kJump:
    case InsnClass::kCondJump:
    case InsnClass::kFarJump:
    case InsnClass::kFarReturn: event.kind = FlowKind::kJump; break;
    default: return;
  }
  consumer_->OnFlow(event);
}

// The start of a run of instructions at `first_ip`: either tracing (re)starts here or the
// previous branch went here.
void PtStreamDecoder::OnInstructionRun(uint64_t first_ip, uint64_t count) {
  if (need_enable_) {
    pending_.valid = false;
    need_enable_ = false;
    Emit(FlowKind::kEnable, first_ip, true);
  } else {
    FlushPending(first_ip, true);
  }
  instructions_ += count;
}

void PtStreamDecoder::HandleEvent(const pt_event& event) {
  if (event.has_tsc) UpdateTime(event.tsc);
  switch (event.type) {
    case ptev_enabled:
      pending_.valid = false;
      need_enable_ = false;
      Emit(FlowKind::kEnable, event.variant.enabled.ip, true);
      break;
    case ptev_disabled:
      FlushPending(event.variant.disabled.ip, !event.ip_suppressed);
      if (!need_enable_) Emit(FlowKind::kDisable, 0, false);
      need_enable_ = false;
      break;
    case ptev_async_disabled:
      FlushPending(event.variant.async_disabled.at, true);
      if (!need_enable_) Emit(FlowKind::kDisable, 0, false);
      need_enable_ = false;
      break;
    case ptev_async_branch:
      FlushPending(event.variant.async_branch.from, true);
      break;
    case ptev_overflow: {
      ++stats_.overflows;
      pending_.valid = false;
      Emit(FlowKind::kOverflow, 0, false);
      need_enable_ = true;
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

absl::Status PtStreamDecoder::DecodeChunk(const uint8_t* padded, size_t size, uint64_t base_offset) {
  stats_.bytes += size;
  need_enable_ = true;
  pending_.valid = false;
  std::vector<uint64_t> psbs = FindPsbOffsets(absl::MakeConstSpan(padded, size));
  if (config_.kind == DecoderKind::kBlock) return DecodeBlocks(padded, size, base_offset, psbs);
  return DecodeInsns(padded, size, base_offset, psbs);
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
  if (config.kind == DecoderKind::kBlock) {
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

}  // namespace

absl::Status PtStreamDecoder::DecodeBlocks(const uint8_t* begin, size_t size, uint64_t base_offset,
                                           const std::vector<uint64_t>& psbs) {
  bool errata_ok = true;
  pt_config c = MakeConfig(config_, begin, size, &errata_ok);
  if (!errata_ok && errata_ok_) {
    errata_ok_ = false;
    warnings_.push_back(absl::StrFormat("libipt 2.0.5 does not know cpu %d/%d/%d: decoding without errata",
                                        config_.cpu.family, config_.cpu.model, config_.cpu.stepping));
  }
  pt_block_decoder* decoder = pt_blk_alloc_decoder(&c);
  if (decoder == nullptr) return absl::InternalError("pt_blk_alloc_decoder failed");
  pt_blk_set_image(decoder, image_->libipt_image());

  int status = pt_blk_sync_forward(decoder);
  uint64_t sync_offset = 0;
  bool synced_once = false;
  while (true) {
    if (status < 0) break;  // no (further) PSB
    pt_blk_get_sync_offset(decoder, &sync_offset);
    synced_once = true;
    if (config_.axis == TimeAxis::kTime) {
      // The PSB+ just read carries the TSC: the segment's first events need it.
      uint64_t tsc = 0;
      uint32_t lost_mtc = 0, lost_cyc = 0;
      if (pt_blk_time(decoder, &tsc, &lost_mtc, &lost_cyc) >= 0) UpdateTime(tsc);
    }
    ++stats_.syncs;
    need_enable_ = true;
    pending_.valid = false;
    uint64_t previous_call = sync_offset;
    while (true) {
      while (status & pts_event_pending) {
        pt_event event;
        status = pt_blk_event(decoder, &event, sizeof event);
        if (status < 0) break;
        HandleEvent(event);
      }
      if (status < 0) break;
      pt_blk_get_offset(decoder, &previous_call);
      pt_block block;
      status = pt_blk_next(decoder, &block, sizeof block);
      if (block.ninsn > 0) {
        ++stats_.blocks;
        OnInstructionRun(block.ip, block.ninsn);
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
            insn_size = block.truncated ? block.size : classifier_.Classify(block.end_ip).size;
          }
          SetPending(klass, block.end_ip, insn_size);
        }
      }
      if (status >= 0) {
        uint64_t tsc = 0;
        uint32_t lost_mtc = 0, lost_cyc = 0;
        if (config_.axis == TimeAxis::kTime && pt_blk_time(decoder, &tsc, &lost_mtc, &lost_cyc) >= 0) {
          UpdateTime(tsc);
        }
      }
      if (status < 0) break;
    }
    if (status == -pte_eos) break;
    uint64_t error_offset = 0;
    pt_blk_get_offset(decoder, &error_offset);
    ++stats_.errors;
    pending_.valid = false;
    Emit(FlowKind::kError, 0, false, base_offset + error_offset, pt_errstr(pt_errcode(status)));
    uint64_t next = 0;
    if (!NextSyncPoint(psbs, previous_call, sync_offset, synced_once, &next)) break;
    status = pt_blk_sync_set(decoder, next);
    if (status < 0) break;
  }
  stats_.instructions = instructions_;
  stats_.undecodable = classifier_.undecodable();
  pt_blk_free_decoder(decoder);
  return absl::OkStatus();
}

absl::Status PtStreamDecoder::DecodeInsns(const uint8_t* begin, size_t size, uint64_t base_offset,
                                          const std::vector<uint64_t>& psbs) {
  bool errata_ok = true;
  pt_config c = MakeConfig(config_, begin, size, &errata_ok);
  if (!errata_ok && errata_ok_) {
    errata_ok_ = false;
    warnings_.push_back(absl::StrFormat("libipt 2.0.5 does not know cpu %d/%d/%d: decoding without errata",
                                        config_.cpu.family, config_.cpu.model, config_.cpu.stepping));
  }
  pt_insn_decoder* decoder = pt_insn_alloc_decoder(&c);
  if (decoder == nullptr) return absl::InternalError("pt_insn_alloc_decoder failed");
  pt_insn_set_image(decoder, image_->libipt_image());

  int status = pt_insn_sync_forward(decoder);
  uint64_t sync_offset = 0;
  bool synced_once = false;
  while (true) {
    if (status < 0) break;
    pt_insn_get_sync_offset(decoder, &sync_offset);
    synced_once = true;
    if (config_.axis == TimeAxis::kTime) {
      uint64_t tsc = 0;
      uint32_t lost_mtc = 0, lost_cyc = 0;
      if (pt_insn_time(decoder, &tsc, &lost_mtc, &lost_cyc) >= 0) UpdateTime(tsc);
    }
    ++stats_.syncs;
    need_enable_ = true;
    pending_.valid = false;
    uint64_t previous_call = sync_offset;
    while (true) {
      while (status & pts_event_pending) {
        pt_event event;
        status = pt_insn_event(decoder, &event, sizeof event);
        if (status < 0) break;
        HandleEvent(event);
      }
      if (status < 0) break;
      pt_insn_get_offset(decoder, &previous_call);
      pt_insn insn;
      status = pt_insn_next(decoder, &insn, sizeof insn);
      if (status < 0) break;
      OnInstructionRun(insn.ip, 1);
      if (observer_ != nullptr) observer_->OnBlock(insn.ip, insn.ip, 1);
      InsnClass klass = FromLibipt(insn.iclass);
      if (klass != InsnClass::kOther && klass != InsnClass::kUnknown) {
        ++stats_.blocks;
        SetPending(klass, insn.ip, insn.size);
      }
      if (config_.axis == TimeAxis::kTime) {
        uint64_t tsc = 0;
        uint32_t lost_mtc = 0, lost_cyc = 0;
        if (pt_insn_time(decoder, &tsc, &lost_mtc, &lost_cyc) >= 0) UpdateTime(tsc);
      }
    }
    if (status == -pte_eos) break;
    uint64_t error_offset = 0;
    pt_insn_get_offset(decoder, &error_offset);
    ++stats_.errors;
    pending_.valid = false;
    Emit(FlowKind::kError, 0, false, base_offset + error_offset, pt_errstr(pt_errcode(status)));
    uint64_t next = 0;
    if (!NextSyncPoint(psbs, previous_call, sync_offset, synced_once, &next)) break;
    status = pt_insn_sync_set(decoder, next);
    if (status < 0) break;
  }
  stats_.instructions = instructions_;
  pt_insn_free_decoder(decoder);
  return absl::OkStatus();
}

}  // namespace ptd::decoder
