#pragma once
// Turns a stream of retired user-space instructions of ONE logical processor into the
// Intel PT packets the hardware would write for the same settings, using libipt's
// pt_encoder for the byte encoding. Models (Intel SDM vol. 3C ch. 33):
//  - PSB+ (PSB, TSC, MODE.Exec, FUP current IP, PSBEND) once psb_period bytes have been
//    written since the last one, at the next instruction boundary;
//  - TNT-8 (up to 6 bits) / TNT-64 (up to 47 bits, option), oldest branch in the most
//    significant payload bit, flushed before any non-timing packet;
//  - return compression with a 64-entry stack like the CPU's (and libipt's): a ret
//    whose target is the top entry gets a taken TNT bit and pops it; otherwise a TIP
//    that leaves the stack alone; calls to the next instruction are not pushed; the
//    stack is emptied at every PSB (only calls seen since the last PSB compress);
//  - TIP/FUP/TIP.PGE IP compression against the last IP (shortest correct form),
//    the last IP being reset at every PSB;
//  - user-only tracing: a far transfer (syscall) ends with TIP.PGD (IP suppressed), the
//    next user instruction starts with MODE.Exec + TIP.PGE; asynchronous transfers
//    (signal delivery, preemption) are FUP(interrupted IP) + TIP.PGD;
//  - TSC packets from the caller's clock, OVF (+ FUP) injection for robustness tests.
// Hot path: Retire() allocates nothing.

#include <cstdint>
#include <memory>

#include "recorder/ptgen/executed_insn.h"
#include "recorder/ptgen/packet_sink.h"

struct pt_encoder;
struct pt_packet;

namespace ptd {

struct PacketGeneratorOptions {
  uint64_t psb_period = 4096;  // bytes between PSB+ (0: only the first one)
  bool noretcomp = false;      // every ret gets a TIP
  bool long_tnt = false;       // TNT-64 when more than 6 bits are pending
  // Besides PSB+ and enables, a TSC packet before a packet whenever the clock moved at
  // least this much since the last TSC (0: never). Clock units are the caller's (ns).
  uint64_t tsc_interval = 0;
  // Timing model of MTC/CYC (hardware's cyc + mtc with cyc_thresh=1), for a clock that
  // counts TSC ticks: ART = TSC / art_ratio (cpuid 0x15 ebx/eax = art_ratio/1; at most
  // 512 so TMA's 9-bit FastCounter holds the remainder), MTC whenever bits
  // [mtc_freq+7 : mtc_freq] of the ART change, core clock = TSC clock (CBR = nom_freq =
  // core_ratio), so a CYC payload is the TSC ticks since the previous CYC.
  bool mtc = false;
  bool cyc = false;
  uint32_t mtc_freq = 8;     // mtc_period field; must be <= 8 (TMA carries 16 CTC bits)
  uint32_t art_ratio = 256;  // TSC ticks per ART tick
  uint8_t core_ratio = 10;   // CBR payload and nominal frequency ratio
};

struct PacketGeneratorStats {
  uint64_t bytes = 0;
  uint64_t instructions = 0;
  uint64_t tnt_bits = 0;
  uint64_t compressed_returns = 0;
  uint64_t tips = 0;
  uint64_t psbs = 0;
  uint64_t enables = 0;
  uint64_t disables = 0;
  uint64_t async_disables = 0;
  uint64_t overflows = 0;
  uint64_t unknown_insns = 0;
  uint64_t mtcs = 0;
  uint64_t cycs = 0;
};

class PacketGenerator {
 public:
  // `sink` must outlive the generator.
  PacketGenerator(const PacketGeneratorOptions& options, PacketSink* sink);
  ~PacketGenerator();
  PacketGenerator(const PacketGenerator&) = delete;
  PacketGenerator& operator=(const PacketGenerator&) = delete;

  // An instruction retired at `time`. If tracing is disabled (start, after a syscall or
  // an asynchronous disable) it is first re-enabled at insn.ip (TIP.PGE).
  // A front end whose time is an instruction's start passes its `length` (one unit on the
  // emulators' virtual clock): the instruction retires at time + length, and its packets
  // are timed there — a branch's CYC (its TNT bit or TIP) and a far transfer's (syscall's)
  // TIP.PGD, the kernel entry. A decoder counts an instruction's time up to its
  // retirement, so every timing packet then says the time after the same instructions.
  void Retire(const ExecutedInsn& insn, uint64_t time, uint64_t length = 0);

  // `count` instructions that fall through one to the next, the first at `ip`, retired
  // at `time`, time + 1, ...: no packet of their own (block-level front ends retire a
  // straight run at once and its last instruction with Retire).
  void RetireStraight(uint64_t ip, uint64_t count, uint64_t time);

  // A branch that leaves the traced region (what the Valgrind front end hides: Valgrind's
  // own preload code): TIP.PGD with its target, as hardware IP filtering writes it. The
  // next retired instruction re-enables (TIP.PGE).
  void RetireLeaving(const ExecutedInsn& insn, uint64_t time);

  // Execution left user space before the instruction at `ip` retired (signal, fault,
  // preemption, thread switch on a CPU): FUP(ip) + TIP.PGD. No-op while disabled.
  void AsyncDisable(uint64_t ip, uint64_t time);

  // Internal buffer overflow: pending TNT bits are flushed, OVF is written, and the
  // trace resumes with FUP at the next retired instruction (the return-compression
  // stack is emptied). The caller drops whatever instructions it pretends were lost.
  void InjectOverflow(uint64_t time);

  // Ends the stream cleanly: if enabled, flushes TNT and disables at `next_ip`
  // (FUP + TIP.PGD), so a decoder stops exactly where the trace stopped; right after an
  // overflow with nothing retired since, the stream just ends.
  void Finish(uint64_t next_ip, uint64_t time);

  // Forgets the return-compression stack (a thread switch on a CPU: the decoder's stack
  // belongs to the previous thread).
  void ClearReturnStack() { ret_depth_ = 0; }

  // The next packet starts a PSB+ (tracing restarted, e.g. after a snapshot stopped the
  // hardware: TraceEn 0 -> 1 begins with PSB+).
  void RestartWithPsb() { need_psb_ = true; }

  // Writes buffered bytes to the sink (packets are only ever buffered whole).
  void Flush();

  bool enabled() const { return enabled_; }
  const PacketGeneratorStats& stats() const { return stats_; }

 private:
  void Enable(uint64_t ip, uint64_t time);
  // Before an instruction retires: enable, or the PSB+ / post-overflow FUP that is due.
  void BeginInsn(uint64_t ip, uint64_t time);
  void EmitPsbPlus(uint64_t ip, uint64_t time, bool with_fup);
  void AddTntBit(bool taken, uint64_t time);  // `time`: the branch retired
  void FlushTnt();
  // Timing packets due before a packet that happens at `time`: MTCs for the ART edges
  // passed, then CYC (cycle-accurate mode), or a TSC every tsc_interval.
  void Timing(uint64_t time);
  void EmitMtcsUpTo(uint64_t time);
  void EmitCyc(uint64_t time);
  void MaybeTscInterval(uint64_t time);
  void EmitTsc(uint64_t time);  // CYC (resets the cycle count), TSC, TMA with MTC
  void EmitIpPacket(int type, uint64_t ip);  // type: enum pt_packet_type
  void EmitSuppressedIp(int type);
  void EmitSimple(int type);
  void Emit(pt_packet* packet);
  void PushReturn(uint64_t address);
  // True (and popped) when `address` is on top of the return-compression stack.
  bool PopReturn(uint64_t address);
  void EmitTip(uint64_t ip, uint64_t time);  // with the TNT bits and timing due before it

  static constexpr int kRetStackSize = 64;  // the CPU's and libipt's depth
  static constexpr size_t kBufferSize = 1 << 16;

  PacketGeneratorOptions options_;
  PacketSink* sink_;
  std::unique_ptr<uint8_t[]> buffer_;
  pt_encoder* encoder_ = nullptr;
  uint64_t buffered_ = 0;
  uint64_t bytes_since_psb_ = 0;
  bool need_psb_ = true;  // the stream starts with PSB+
  bool enabled_ = false;
  bool need_ovf_fup_ = false;  // an overflow was injected: resume with FUP
  uint64_t last_ip_ = 0;
  uint64_t last_tsc_ = 0;
  uint64_t last_time_ = 0;  // time of the newest retired instruction
  uint64_t last_cyc_time_ = 0;   // cycle counter reference (last CYC or TSC)
  uint64_t last_mtc_edge_ = 0;   // MTC periods since time 0 accounted for
  uint64_t tnt_first_time_ = 0;  // retirement of the oldest pending TNT bit
  uint64_t tnt_payload_ = 0;
  int tnt_bits_ = 0;
  uint64_t ret_stack_[kRetStackSize];
  int ret_top_ = 0;    // index of the next free slot (ring)
  int ret_depth_ = 0;  // valid entries, at most kRetStackSize
  PacketGeneratorStats stats_;
};

}  // namespace ptd
