#include "recorder/ptgen/packet_generator.h"

#include <intel-pt.h>

#include <cstring>

namespace ptd {
namespace {

constexpr int kTnt8MaxBits = 6;
constexpr int kTnt64MaxBits = 47;
// Largest packet we emit is PSB (16 bytes); keep room for a few.
constexpr size_t kMaxPacketBytes = 32;

bool IsSignExtended48(uint64_t ip) {
  const uint64_t upper = ip >> 47;
  return upper == 0 || upper == 0x1ffff;
}

// The shortest IP compression that reconstructs `ip` exactly from `last_ip` (SDM
// "IP Compression"): the decoder replaces the low 16/32/48 bits of the last IP, or
// sign-extends 48 bits, or takes all 64.
pt_ip_compression ChooseIpCompression(uint64_t ip, uint64_t last_ip) {
  if ((ip >> 16) == (last_ip >> 16)) return pt_ipc_update_16;
  if ((ip >> 32) == (last_ip >> 32)) return pt_ipc_update_32;
  if (IsSignExtended48(ip)) return pt_ipc_sext_48;
  if ((ip >> 48) == (last_ip >> 48)) return pt_ipc_update_48;
  return pt_ipc_full;
}

}  // namespace

const char* BranchKindName(BranchKind kind) {
  switch (kind) {
    case BranchKind::kNone: return "none";
    case BranchKind::kCondJump: return "cond_jump";
    case BranchKind::kDirectJump: return "direct_jump";
    case BranchKind::kIndirectJump: return "indirect_jump";
    case BranchKind::kDirectCall: return "direct_call";
    case BranchKind::kIndirectCall: return "indirect_call";
    case BranchKind::kReturn: return "return";
    case BranchKind::kFarTransfer: return "far_transfer";
    case BranchKind::kUnknown: return "unknown";
  }
  return "?";
}

PacketGenerator::PacketGenerator(const PacketGeneratorOptions& options, PacketSink* sink)
    : options_(options), sink_(sink), buffer_(new uint8_t[kBufferSize]) {
  pt_config config;
  pt_config_init(&config);
  config.begin = buffer_.get();
  config.end = buffer_.get() + kBufferSize;
  encoder_ = pt_alloc_encoder(&config);
}

PacketGenerator::~PacketGenerator() {
  Flush();
  pt_free_encoder(encoder_);
}

void PacketGenerator::Flush() {
  if (buffered_ == 0) return;
  sink_->Write(buffer_.get(), buffered_);
  buffered_ = 0;
  pt_enc_sync_set(encoder_, 0);
}

void PacketGenerator::Emit(pt_packet* packet) {
  if (buffered_ + kMaxPacketBytes > kBufferSize) Flush();
  const int size = pt_enc_next(encoder_, packet);
  // The encoder only fails on invalid packets, which this class never builds; a
  // failure here is a programming error we must not hide as a short stream.
  if (size < 0) __builtin_trap();
  buffered_ += static_cast<uint64_t>(size);
  stats_.bytes += static_cast<uint64_t>(size);
  bytes_since_psb_ += static_cast<uint64_t>(size);
  if (options_.psb_period != 0 && bytes_since_psb_ >= options_.psb_period) need_psb_ = true;
}

void PacketGenerator::EmitSimple(int type) {
  pt_packet packet;
  std::memset(&packet, 0, sizeof(packet));
  packet.type = static_cast<pt_packet_type>(type);
  Emit(&packet);
}

void PacketGenerator::EmitIpPacket(int type, uint64_t ip) {
  pt_packet packet;
  std::memset(&packet, 0, sizeof(packet));
  packet.type = static_cast<pt_packet_type>(type);
  const pt_ip_compression ipc = ChooseIpCompression(ip, last_ip_);
  packet.payload.ip.ipc = ipc;
  switch (ipc) {
    case pt_ipc_update_16: packet.payload.ip.ip = ip & 0xffffull; break;
    case pt_ipc_update_32: packet.payload.ip.ip = ip & 0xffffffffull; break;
    case pt_ipc_sext_48:
    case pt_ipc_update_48: packet.payload.ip.ip = ip & 0xffffffffffffull; break;
    default: packet.payload.ip.ip = ip; break;
  }
  Emit(&packet);
  last_ip_ = ip;
}

void PacketGenerator::EmitSuppressedIp(int type) {
  pt_packet packet;
  std::memset(&packet, 0, sizeof(packet));
  packet.type = static_cast<pt_packet_type>(type);
  packet.payload.ip.ipc = pt_ipc_suppressed;
  Emit(&packet);
}

namespace {
uint64_t MtcPeriod(const PacketGeneratorOptions& options) {
  return static_cast<uint64_t>(options.art_ratio) << options.mtc_freq;
}
}  // namespace

void PacketGenerator::EmitCyc(uint64_t time) {
  if (!options_.cyc) return;
  // cyc_thresh=1: a CYC only when at least one cycle passed since the previous one.
  if (time <= last_cyc_time_) return;
  pt_packet packet;
  std::memset(&packet, 0, sizeof(packet));
  packet.type = ppt_cyc;
  packet.payload.cyc.value = time - last_cyc_time_;
  Emit(&packet);
  last_cyc_time_ = time;
  ++stats_.cycs;
}

void PacketGenerator::EmitMtcsUpTo(uint64_t time) {
  if (!options_.mtc) return;
  const uint64_t period = MtcPeriod(options_);
  const uint64_t edge = time / period;
  if (edge <= last_mtc_edge_) return;
  if (edge - last_mtc_edge_ > 255) {
    // More than the 8-bit payload can tell apart: a full timestamp instead.
    EmitTsc(time);
    return;
  }
  for (uint64_t e = last_mtc_edge_ + 1; e <= edge; ++e) {
    // A CYC up to the edge first: the cycle count between two MTCs is then exactly the
    // MTC period, which is what libipt's calibration (and its CYC-after-MTC estimate)
    // assumes. Real hardware puts no CYC before MTC; its CYCs are dense enough that the
    // misalignment is small, the emulator's (one per step) are not.
    EmitCyc(e * period);
    pt_packet packet;
    std::memset(&packet, 0, sizeof(packet));
    packet.type = ppt_mtc;
    packet.payload.mtc.ctc = static_cast<uint8_t>(e & 0xff);  // ART[mtc_freq+7 : mtc_freq]
    Emit(&packet);
    ++stats_.mtcs;
  }
  last_mtc_edge_ = edge;
}

void PacketGenerator::Timing(uint64_t time) {
  EmitMtcsUpTo(time);
  EmitCyc(time);
  MaybeTscInterval(time);
}

void PacketGenerator::MaybeTscInterval(uint64_t time) {
  if (options_.tsc_interval != 0 && time >= last_tsc_ + options_.tsc_interval) EmitTsc(time);
}

void PacketGenerator::EmitTsc(uint64_t time) {
  // The CYC before it ends the cycle count at the TSC, so the next CYC counts from there
  // (libipt adds a CYC after TSC + TMA to the TSC).
  EmitCyc(time);
  pt_packet packet;
  std::memset(&packet, 0, sizeof(packet));
  packet.type = ppt_tsc;
  packet.payload.tsc.tsc = time & ((1ull << 56) - 1);  // TSC packets carry 7 bytes
  Emit(&packet);
  last_tsc_ = time;
  last_cyc_time_ = time;
  if (options_.mtc) {
    // TMA: the ART's low 16 bits and the TSC ticks since the last ART tick.
    std::memset(&packet, 0, sizeof(packet));
    packet.type = ppt_tma;
    packet.payload.tma.ctc = static_cast<uint16_t>((time / options_.art_ratio) & 0xffff);
    packet.payload.tma.fc = static_cast<uint16_t>(time % options_.art_ratio);
    Emit(&packet);
    last_mtc_edge_ = time / MtcPeriod(options_);
  }
}

void PacketGenerator::EmitPsbPlus(uint64_t ip, uint64_t time, bool with_fup) {
  FlushTnt();
  if (stats_.psbs == 0) {
    // The cycle counter and the MTC edges start with tracing.
    last_cyc_time_ = time;
    if (options_.mtc) last_mtc_edge_ = time / MtcPeriod(options_);
  }
  // Timing that belongs before the PSB (CYC is not a PSB+ packet).
  EmitMtcsUpTo(time);
  EmitCyc(time);
  EmitSimple(ppt_psb);
  // Hardware resets the last IP at PSB; the FUP below is compressed against zero.
  last_ip_ = 0;
  EmitTsc(time);
  if (options_.cyc) {
    pt_packet cbr;
    std::memset(&cbr, 0, sizeof(cbr));
    cbr.type = ppt_cbr;
    cbr.payload.cbr.ratio = options_.core_ratio;
    Emit(&cbr);
  }
  if (with_fup) {
    pt_packet mode;
    std::memset(&mode, 0, sizeof(mode));
    mode.type = ppt_mode;
    mode.payload.mode.leaf = pt_mol_exec;
    mode.payload.mode.bits.exec.csl = 1;  // 64-bit user code
    Emit(&mode);
    EmitIpPacket(ppt_fup, ip);
  }
  EmitSimple(ppt_psbend);
  // SDM 33.2.1.2: only RETs whose CALLs were seen since the last PSB may be compressed,
  // so a decoder starting at any PSB never meets a compressed RET it cannot resolve.
  ret_depth_ = 0;
  bytes_since_psb_ = 0;
  need_psb_ = false;
  ++stats_.psbs;
}

void PacketGenerator::Enable(uint64_t ip, uint64_t time) {
  if (need_psb_) {
    // PacketEn is still 0: the PSB+ carries no FUP, the TIP.PGE below says where.
    EmitPsbPlus(ip, time, /*with_fup=*/false);
  } else {
    // No MTCs for the disabled stretch (a syscall: the thread may have slept, and a
    // per-thread event is off while its thread is scheduled out); TSC + TMA resync.
    EmitTsc(time);
  }
  pt_packet mode;
  std::memset(&mode, 0, sizeof(mode));
  mode.type = ppt_mode;
  mode.payload.mode.leaf = pt_mol_exec;
  mode.payload.mode.bits.exec.csl = 1;
  Emit(&mode);
  EmitIpPacket(ppt_tip_pge, ip);
  enabled_ = true;
  need_ovf_fup_ = false;  // the TIP.PGE is where the trace resumes
  ++stats_.enables;
}

void PacketGenerator::AddTntBit(bool taken, uint64_t time) {
  if (tnt_bits_ == 0) tnt_first_time_ = time;
  tnt_payload_ = (tnt_payload_ << 1) | (taken ? 1 : 0);
  ++tnt_bits_;
  ++stats_.tnt_bits;
  const int max_bits = options_.long_tnt ? kTnt64MaxBits : kTnt8MaxBits;
  if (tnt_bits_ >= max_bits) FlushTnt();
}

void PacketGenerator::FlushTnt() {
  if (tnt_bits_ == 0) return;
  MaybeTscInterval(last_time_);
  // The CYC before a TNT gives the retirement time of its first branch (SDM).
  EmitMtcsUpTo(tnt_first_time_);
  EmitCyc(tnt_first_time_);
  pt_packet packet;
  std::memset(&packet, 0, sizeof(packet));
  packet.type = tnt_bits_ <= kTnt8MaxBits ? ppt_tnt_8 : ppt_tnt_64;
  packet.payload.tnt.bit_size = static_cast<uint8_t>(tnt_bits_);
  packet.payload.tnt.payload = tnt_payload_;
  tnt_bits_ = 0;
  tnt_payload_ = 0;
  Emit(&packet);
}

void PacketGenerator::PushReturn(uint64_t address) {
  ret_stack_[ret_top_] = address;
  ret_top_ = (ret_top_ + 1) % kRetStackSize;
  if (ret_depth_ < kRetStackSize) ++ret_depth_;
}

void PacketGenerator::RetireStraight(uint64_t ip, uint64_t count, uint64_t time) {
  if (count == 0) return;
  ExecutedInsn first;
  first.ip = ip;
  Retire(first, time);  // enables, or writes a due PSB+ / post-overflow FUP, at `ip`
  stats_.instructions += count - 1;
  last_time_ = time + count - 1;
}

void PacketGenerator::BeginInsn(uint64_t ip, uint64_t time) {
  if (!enabled_) {
    Enable(ip, time);
  } else if (need_ovf_fup_) {
    // Compressed against zero: the decoder's last IP is not trusted across an overflow.
    last_ip_ = 0;
    EmitIpPacket(ppt_fup, ip);
    need_ovf_fup_ = false;
  } else if (need_psb_) {
    EmitPsbPlus(ip, time, /*with_fup=*/true);
  }
  ++stats_.instructions;
  last_time_ = time;
}

bool PacketGenerator::PopReturn(uint64_t address) {
  if (options_.noretcomp || ret_depth_ == 0) return false;
  const int top = (ret_top_ + kRetStackSize - 1) % kRetStackSize;
  if (ret_stack_[top] != address) return false;
  ret_top_ = top;
  --ret_depth_;
  return true;
}

void PacketGenerator::EmitTip(uint64_t ip, uint64_t time) {
  FlushTnt();
  Timing(time);
  EmitIpPacket(ppt_tip, ip);
  ++stats_.tips;
}

void PacketGenerator::RetireLeaving(const ExecutedInsn& insn, uint64_t time) {
  BeginInsn(insn.ip, time);
  // A branch out of the traced region (IP filtering): TIP.PGD with the target instead of
  // the branch's own TNT bit or TIP. A call still pushes its return address, as libipt
  // does when it decodes the call: the two return stacks stay alike, so a later return
  // is compressed only where the decoder can follow it.
  const uint64_t fall_through = insn.ip + insn.size;
  if ((insn.kind == BranchKind::kDirectCall && insn.next_ip != fall_through) ||
      insn.kind == BranchKind::kIndirectCall) {
    PushReturn(fall_through);
  }
  FlushTnt();
  Timing(time);
  EmitIpPacket(ppt_tip_pgd, insn.next_ip);
  enabled_ = false;
  ++stats_.disables;
}

void PacketGenerator::Retire(const ExecutedInsn& insn, uint64_t time, uint64_t length) {
  BeginInsn(insn.ip, time);
  const uint64_t retired = time + length;
  const uint64_t fall_through = insn.ip + insn.size;
  switch (insn.kind) {
    case BranchKind::kNone:
    case BranchKind::kDirectJump:
      break;
    case BranchKind::kUnknown:
      ++stats_.unknown_insns;
      break;
    case BranchKind::kCondJump:
      AddTntBit(insn.next_ip != fall_through, retired);
      break;
    case BranchKind::kDirectCall:
      // A call to the next instruction reads the IP (PIC code); neither the CPU nor
      // libipt puts it on the return-compression stack.
      if (insn.next_ip != fall_through) PushReturn(fall_through);
      break;
    case BranchKind::kIndirectCall:
      PushReturn(fall_through);
      EmitTip(insn.next_ip, retired);
      break;
    case BranchKind::kIndirectJump:
      EmitTip(insn.next_ip, retired);
      break;
    case BranchKind::kReturn:
      if (PopReturn(insn.next_ip)) {
        ++stats_.compressed_returns;
        AddTntBit(true, retired);
      } else {
        EmitTip(insn.next_ip, retired);
      }
      break;
    case BranchKind::kFarTransfer:
      // User-only tracing: the CPU enters the kernel, PacketEn drops, and the target
      // (a kernel address) is suppressed.
      FlushTnt();
      Timing(retired);
      EmitSuppressedIp(ppt_tip_pgd);
      enabled_ = false;
      ++stats_.disables;
      break;
  }
}

void PacketGenerator::AsyncDisable(uint64_t ip, uint64_t time) {
  if (!enabled_) return;
  FlushTnt();
  Timing(time);
  EmitIpPacket(ppt_fup, ip);
  EmitSuppressedIp(ppt_tip_pgd);
  enabled_ = false;
  need_ovf_fup_ = false;  // after an overflow, the FUP above is where it resumed
  ++stats_.async_disables;
}

void PacketGenerator::InjectOverflow(uint64_t time) {
  // The branches retired so far stay decodable; what the caller drops after this call
  // is what the overflow lost. Like the CPU, the trace resumes with FUP (or TIP.PGE
  // when tracing is off by then) at the next instruction.
  FlushTnt();
  Timing(time);
  EmitSimple(ppt_ovf);
  ret_depth_ = 0;
  need_ovf_fup_ = enabled_;
  ++stats_.overflows;
}

void PacketGenerator::Finish(uint64_t next_ip, uint64_t time) {
  // Nothing retired since an overflow: the trace just ends after the OVF.
  if (!need_ovf_fup_) AsyncDisable(next_ip, time);
  FlushTnt();
  Flush();
}

}  // namespace ptd
