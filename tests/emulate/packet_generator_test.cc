// Packet-level checks of the generator: the bytes it writes are decoded with libipt's
// packet decoder and compared with the packets the SDM rules call for.
#include "recorder/ptgen/packet_generator.h"

#include <intel-pt.h>

#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "recorder/ptgen/memory_sink.h"

namespace ptd {
namespace {

struct Pkt {
  pt_packet_type type;
  uint64_t a = 0;  // ip / tnt payload / tsc
  int b = 0;       // ipc / tnt bit size
  bool operator==(const Pkt& o) const { return type == o.type && a == o.a && b == o.b; }
};

std::string Describe(const Pkt& p) {
  return std::to_string(p.type) + "(" + std::to_string(p.a) + "," + std::to_string(p.b) + ")";
}

std::vector<Pkt> DecodePackets(std::vector<uint8_t> bytes) {
  bytes.resize(bytes.size() + 32, 0);  // libipt may read past the end while syncing
  pt_config config;
  pt_config_init(&config);
  config.begin = bytes.data();
  config.end = bytes.data() + bytes.size() - 32;
  pt_packet_decoder* decoder = pt_pkt_alloc_decoder(&config);
  std::vector<Pkt> out;
  EXPECT_GE(pt_pkt_sync_set(decoder, 0), 0);
  for (;;) {
    pt_packet packet;
    const int status = pt_pkt_next(decoder, &packet, sizeof(packet));
    if (status == -pte_eos) break;
    EXPECT_GE(status, 0) << pt_errstr(pt_errcode(status));
    if (status < 0) break;
    Pkt p{packet.type};
    switch (packet.type) {
      case ppt_fup: case ppt_tip: case ppt_tip_pge: case ppt_tip_pgd:
        p.a = packet.payload.ip.ip;
        p.b = packet.payload.ip.ipc;
        break;
      case ppt_tnt_8: case ppt_tnt_64:
        p.a = packet.payload.tnt.payload;
        p.b = packet.payload.tnt.bit_size;
        break;
      case ppt_tsc: p.a = packet.payload.tsc.tsc; break;
      case ppt_mtc: p.a = packet.payload.mtc.ctc; break;
      case ppt_tma: p.a = packet.payload.tma.ctc; p.b = packet.payload.tma.fc; break;
      case ppt_cyc: p.a = packet.payload.cyc.value; break;
      case ppt_cbr: p.a = packet.payload.cbr.ratio; break;
      case ppt_mode: p.a = packet.payload.mode.bits.exec.csl; p.b = packet.payload.mode.leaf; break;
      default: break;
    }
    out.push_back(p);
  }
  pt_pkt_free_decoder(decoder);
  return out;
}

void ExpectPackets(const std::vector<Pkt>& got, const std::vector<Pkt>& want) {
  std::string g, w;
  for (const Pkt& p : got) g += Describe(p) + " ";
  for (const Pkt& p : want) w += Describe(p) + " ";
  EXPECT_EQ(g, w);
}

constexpr uint64_t kBase = 0x555555554000;

ExecutedInsn Plain(uint64_t ip, uint8_t size) { return {ip, ip + size, size, BranchKind::kNone}; }
ExecutedInsn Insn(uint64_t ip, uint8_t size, BranchKind kind, uint64_t next) {
  return {ip, next, size, kind};
}

// The packets every stream starts with: PSB+ without FUP (tracing not yet on), then the
// enable at the first instruction. The first IP after PSB compresses against 0.
std::vector<Pkt> StartPackets(uint64_t ip, uint64_t time, pt_ip_compression ipc) {
  return {{ppt_psb},
          {ppt_tsc, time},
          {ppt_psbend},
          {ppt_mode, 1, pt_mol_exec},
          {ppt_tip_pge, ipc == pt_ipc_sext_48 ? (ip & 0xffffffffffffull) : ip, ipc}};
}

// StartPackets followed by `rest`.
std::vector<Pkt> StartThen(uint64_t ip, uint64_t time, std::initializer_list<Pkt> rest) {
  std::vector<Pkt> packets = StartPackets(ip, time, pt_ipc_sext_48);
  packets.insert(packets.end(), rest);
  return packets;
}

// No periodic PSB+: the packets of a short run are those of its instructions only.
PacketGeneratorOptions NoPsbOptions() {
  PacketGeneratorOptions options;
  options.psb_period = 0;
  return options;
}

// Runs `script` on a generator with `options`, ends it (the generator's destructor
// writes what is pending) and decodes what it wrote.
std::vector<Pkt> Generate(const PacketGeneratorOptions& options,
                          const std::function<void(PacketGenerator&)>& script) {
  MemorySink sink;
  {
    PacketGenerator gen(options, &sink);
    script(gen);
  }
  return DecodePackets(sink.bytes());
}

TEST(PacketGeneratorTest, TntBitsOldestInMostSignificantPosition) {
  const std::vector<Pkt> got = Generate(NoPsbOptions(), [](PacketGenerator& gen) {
    // taken, not taken, taken, taken, then a syscall that forces the flush.
    gen.Retire(Insn(kBase, 2, BranchKind::kCondJump, kBase + 0x10), 100);
    gen.Retire(Insn(kBase + 0x10, 2, BranchKind::kCondJump, kBase + 0x12), 101);
    gen.Retire(Insn(kBase + 0x12, 2, BranchKind::kCondJump, kBase + 0x40), 102);
    gen.Retire(Insn(kBase + 0x40, 6, BranchKind::kCondJump, kBase + 0x80), 103);
    gen.Retire(Insn(kBase + 0x80, 2, BranchKind::kFarTransfer, kBase + 0x82), 104);
    gen.Flush();
  });
  ExpectPackets(got, StartThen(kBase, 100, {{ppt_tnt_8, 0b1011, 4},
                                            {ppt_tip_pgd, 0, pt_ipc_suppressed}}));
}

TEST(PacketGeneratorTest, TntEightFlushesAfterSixBits) {
  const std::vector<Pkt> got = Generate(NoPsbOptions(), [](PacketGenerator& gen) {
    for (int i = 0; i < 7; ++i) {
      const bool taken = i % 3 == 0;  // T N N T N N T
      gen.Retire(Insn(kBase, 2, BranchKind::kCondJump, taken ? kBase : kBase + 2), 1);
    }
    gen.Finish(kBase + 2, 2);
  });
  ExpectPackets(got, StartThen(kBase, 1, {{ppt_tnt_8, 0b100100, 6},
                                          {ppt_tnt_8, 0b1, 1},
                                          {ppt_fup, (kBase + 2) & 0xffff, pt_ipc_update_16},
                                          {ppt_tip_pgd, 0, pt_ipc_suppressed}}));
}

TEST(PacketGeneratorTest, LongTntUsesTnt64) {
  PacketGeneratorOptions options = NoPsbOptions();
  options.long_tnt = true;
  uint64_t expected = 0;
  const std::vector<Pkt> got = Generate(options, [&](PacketGenerator& gen) {
    for (int i = 0; i < 10; ++i) {
      const bool taken = i % 2 == 0;
      expected = (expected << 1) | (taken ? 1 : 0);
      gen.Retire(Insn(kBase, 2, BranchKind::kCondJump, taken ? kBase : kBase + 2), 1);
    }
    gen.Finish(kBase + 2, 2);
  });
  EXPECT_EQ(expected, 0b1010101010u);
  ASSERT_GE(got.size(), 6u);
  EXPECT_EQ(Describe(got[5]), Describe({ppt_tnt_64, 0b1010101010, 10}));
}

TEST(PacketGeneratorTest, IpCompressionIsShortestCorrectForm) {
  const uint64_t near = kBase + 0x1234;            // same upper 48 bits as kBase
  const uint64_t mid = 0x555500001000;             // same upper 32 bits as near? no: 0x5555 vs 0x5555_5555
  const uint64_t libc = 0x7ffff7a00000;            // different upper 32 bits
  const uint64_t libc_near = 0x7ffff7a12345;       // same upper 32 bits as libc
  const std::vector<Pkt> got = Generate(NoPsbOptions(), [&](PacketGenerator& gen) {
    gen.Retire(Insn(kBase, 2, BranchKind::kIndirectJump, near), 1);
    gen.Retire(Insn(near, 2, BranchKind::kIndirectJump, mid), 1);
    gen.Retire(Insn(mid, 2, BranchKind::kIndirectJump, libc), 1);
    gen.Retire(Insn(libc, 2, BranchKind::kIndirectJump, libc_near), 1);
    gen.Retire(Insn(libc_near, 2, BranchKind::kFarTransfer, 0), 1);
    gen.Flush();
  });
  ExpectPackets(got, StartThen(kBase, 1, {{ppt_tip, near & 0xffff, pt_ipc_update_16},
                                          {ppt_tip, mid & 0xffffffff, pt_ipc_update_32},
                                          {ppt_tip, libc & 0xffffffffffff, pt_ipc_sext_48},
                                          {ppt_tip, libc_near & 0xffffffff, pt_ipc_update_32},
                                          {ppt_tip_pgd, 0, pt_ipc_suppressed}}));
}

TEST(PacketGeneratorTest, KernelHalfAddressesNeedFullOrSignExtendedIp) {
  const std::vector<Pkt> got = Generate(NoPsbOptions(), [](PacketGenerator& gen) {
    gen.Retire(Insn(kBase, 2, BranchKind::kIndirectJump, 0xffffffff81000000ull), 1);
    gen.Retire(Insn(0xffffffff81000000ull, 2, BranchKind::kIndirectJump, 0x1234567812345678ull), 1);
    gen.Flush();
  });
  ASSERT_EQ(got.size(), 7u);
  EXPECT_EQ(Describe(got[5]), Describe({ppt_tip, 0xffff81000000ull, pt_ipc_sext_48}));
  EXPECT_EQ(Describe(got[6]), Describe({ppt_tip, 0x1234567812345678ull, pt_ipc_full}));
}

// call f; ... ret (to after the call) is compressed into a taken TNT bit; a ret to
// anywhere else is a TIP; with noretcomp every ret is a TIP.
std::vector<Pkt> RunCallReturnSequence(bool noretcomp) {
  PacketGeneratorOptions options = NoPsbOptions();
  options.noretcomp = noretcomp;
  return Generate(options, [](PacketGenerator& gen) {
    const uint64_t f = kBase + 0x100;
    const uint64_t g = kBase + 0x200;
    gen.Retire(Insn(kBase, 5, BranchKind::kDirectCall, f), 1);        // push kBase+5
    gen.Retire(Insn(f, 5, BranchKind::kDirectCall, g), 1);            // push f+5
    gen.Retire(Insn(g, 1, BranchKind::kReturn, f + 5), 1);            // matches: TNT 1
    gen.Retire(Insn(f + 5, 1, BranchKind::kReturn, kBase + 0x50), 1); // mismatch: TIP
    gen.Retire(Insn(kBase + 0x50, 5, BranchKind::kDirectCall, kBase + 0x55), 1);  // call next: no push
    gen.Retire(Insn(kBase + 0x55, 1, BranchKind::kReturn, kBase + 5), 1);  // top is still kBase+5: TNT
    gen.Retire(Insn(kBase + 5, 2, BranchKind::kFarTransfer, 0), 1);
    gen.Flush();
  });
}

TEST(PacketGeneratorTest, ReturnCompressionOn) {
  ExpectPackets(RunCallReturnSequence(/*noretcomp=*/false),
                StartThen(kBase, 1, {{ppt_tnt_8, 0b1, 1},
                                     {ppt_tip, (kBase + 0x50) & 0xffff, pt_ipc_update_16},
                                     {ppt_tnt_8, 0b1, 1},
                                     {ppt_tip_pgd, 0, pt_ipc_suppressed}}));
}

TEST(PacketGeneratorTest, ReturnCompressionOff) {
  ExpectPackets(RunCallReturnSequence(/*noretcomp=*/true),
                StartThen(kBase, 1, {{ppt_tip, (kBase + 0x105) & 0xffff, pt_ipc_update_16},
                                     {ppt_tip, (kBase + 0x50) & 0xffff, pt_ipc_update_16},
                                     {ppt_tip, (kBase + 0x5) & 0xffff, pt_ipc_update_16},
                                     {ppt_tip_pgd, 0, pt_ipc_suppressed}}));
}

TEST(PacketGeneratorTest, PsbPlusEveryPeriodCarriesTscModeAndFupOfCurrentIp) {
  PacketGeneratorOptions options;
  options.psb_period = 64;
  const std::vector<Pkt> got = Generate(options, [](PacketGenerator& gen) {
    uint64_t ip = kBase;
    for (int i = 0; i < 40; ++i) {
      // Alternating far-apart indirect jumps: 4-byte TIPs (update_32 payload).
      const uint64_t next = (i % 2 == 0) ? 0x7fff00001000ull + i : kBase + i;
      gen.Retire(Insn(ip, 2, BranchKind::kIndirectJump, next), 1000 + i);
      ip = next;
    }
    gen.Flush();
  });
  // Every PSB after the first is followed by TSC, MODE.Exec, FUP (IP compressed
  // against zero: sext_48 for user addresses), PSBEND; the FUP is the IP of the
  // instruction about to execute, which is the target of the preceding TIP.
  int psbs = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].type != ppt_psb) continue;
    ++psbs;
    if (psbs == 1) continue;
    ASSERT_LT(i + 4, got.size());
    EXPECT_EQ(got[i + 1].type, ppt_tsc);
    EXPECT_EQ(got[i + 2].type, ppt_mode);
    EXPECT_EQ(got[i + 3].type, ppt_fup);
    EXPECT_EQ(got[i + 3].b, pt_ipc_sext_48);
    EXPECT_EQ(got[i + 4].type, ppt_psbend);
    ASSERT_GE(i, 1u);
    EXPECT_EQ(got[i - 1].type, ppt_tip);
    // The TIP before was compressed against the previous last IP; its low 32 bits
    // match the FUP's.
    EXPECT_EQ(got[i - 1].a & 0xffffffff, got[i + 3].a & 0xffffffff);
  }
  // 40 TIPs of 5 bytes = 200 bytes plus PSB+ overhead: at least 3 periods of 64 bytes.
  EXPECT_GE(psbs, 4);
}

TEST(PacketGeneratorTest, SyscallDisablesAndNextInstructionEnables) {
  const std::vector<Pkt> got = Generate(NoPsbOptions(), [](PacketGenerator& gen) {
    gen.Retire(Insn(kBase, 2, BranchKind::kCondJump, kBase + 2), 5);
    gen.Retire(Insn(kBase + 2, 2, BranchKind::kFarTransfer, kBase + 4), 6);
    gen.Retire(Plain(kBase + 4, 3), 9);
    gen.AsyncDisable(kBase + 7, 10);  // signal arrives
    gen.Retire(Plain(kBase + 0x900, 1), 12);  // handler
    gen.Flush();
  });
  ExpectPackets(got, StartThen(kBase, 5, {
      {ppt_tnt_8, 0b0, 1}, {ppt_tip_pgd, 0, pt_ipc_suppressed},
      {ppt_tsc, 9}, {ppt_mode, 1, pt_mol_exec},
      {ppt_tip_pge, (kBase + 4) & 0xffff, pt_ipc_update_16},
      {ppt_fup, (kBase + 7) & 0xffff, pt_ipc_update_16}, {ppt_tip_pgd, 0, pt_ipc_suppressed},
      {ppt_tsc, 12}, {ppt_mode, 1, pt_mol_exec},
      {ppt_tip_pge, (kBase + 0x900) & 0xffff, pt_ipc_update_16}}));
}

TEST(PacketGeneratorTest, OverflowFlushesPendingBitsThenResumesWithFup) {
  const std::vector<Pkt> got = Generate(NoPsbOptions(), [](PacketGenerator& gen) {
    gen.Retire(Insn(kBase, 2, BranchKind::kCondJump, kBase + 2), 1);
    gen.InjectOverflow(2);
    gen.Retire(Plain(kBase + 0x40, 2), 3);
    gen.Flush();
  });
  ExpectPackets(got, StartThen(kBase, 1, {
      {ppt_tnt_8, 0b0, 1}, {ppt_ovf},
      {ppt_fup, (kBase + 0x40) & 0xffffffffffff, pt_ipc_sext_48}}));
}

// A stream that ends while its instructions are being lost ends with the OVF (no FUP +
// TIP.PGD at an IP nothing retired at); an asynchronous disable after the OVF is where
// the trace resumed, so the next enable is a plain TIP.PGE with no stray FUP after it.
TEST(PacketGeneratorTest, OverflowThenFinishOrDisableWritesNoStrayFup) {
  const std::vector<Pkt> ended = Generate(NoPsbOptions(), [](PacketGenerator& gen) {
    gen.Retire(Insn(kBase, 2, BranchKind::kIndirectJump, kBase + 0x40), 1);
    gen.InjectOverflow(2);
    gen.Finish(kBase + 0x80, 3);
  });
  ExpectPackets(ended, StartThen(kBase, 1, {
      {ppt_tip, (kBase + 0x40) & 0xffff, pt_ipc_update_16}, {ppt_ovf}}));

  const std::vector<Pkt> disabled = Generate(NoPsbOptions(), [](PacketGenerator& gen) {
    gen.Retire(Insn(kBase, 2, BranchKind::kIndirectJump, kBase + 0x40), 1);
    gen.InjectOverflow(2);
    gen.AsyncDisable(kBase + 0x80, 3);
    gen.Retire(Plain(kBase + 0x900, 1), 4);
    gen.Retire(Plain(kBase + 0x901, 1), 5);
    gen.Flush();
  });
  ExpectPackets(disabled, StartThen(kBase, 1, {
      {ppt_tip, (kBase + 0x40) & 0xffff, pt_ipc_update_16}, {ppt_ovf},
      {ppt_fup, (kBase + 0x80) & 0xffff, pt_ipc_update_16}, {ppt_tip_pgd, 0, pt_ipc_suppressed},
      {ppt_tsc, 4}, {ppt_mode, 1, pt_mol_exec},
      {ppt_tip_pge, (kBase + 0x900) & 0xffff, pt_ipc_update_16}}));
}

TEST(PacketGeneratorTest, NoReturnCompressionForCallsBeforeTheLastPsb) {
  PacketGeneratorOptions options;
  options.psb_period = 8;  // MODE.Exec + TIP.PGE after the first PSB+ exceed it
  const std::vector<Pkt> got = Generate(options, [](PacketGenerator& gen) {
    const uint64_t f = kBase + 0x100;
    gen.Retire(Insn(kBase, 5, BranchKind::kDirectCall, f), 1);  // push kBase+5
    gen.Retire(Insn(f, 1, BranchKind::kReturn, kBase + 5), 2);  // PSB+ first: no compression
    gen.Flush();
  });
  ASSERT_GE(got.size(), 2u);
  // ... PSB, TSC, MODE, FUP(f), PSBEND, then the ret as a TIP (no TNT anywhere).
  EXPECT_EQ(got[got.size() - 1].type, ppt_tip);
  EXPECT_EQ(got[got.size() - 2].type, ppt_psbend);
  for (const Pkt& p : got) EXPECT_NE(p.type, ppt_tnt_8);
}

// MTC/CYC with a small model so every packet can be worked out by hand: ART = TSC / 4,
// MTC every 2^2 ART ticks (16 TSC ticks, payload = ART >> 2 = time / 16), 1 cycle = 1 tick.
PacketGeneratorOptions TimedOptions() {
  PacketGeneratorOptions options = NoPsbOptions();
  options.mtc = true;
  options.cyc = true;
  options.mtc_freq = 2;
  options.art_ratio = 4;
  options.core_ratio = 10;
  return options;
}

TEST(PacketGeneratorTest, MtcCycTscTmaFollowTheClock) {
  const std::vector<Pkt> got = Generate(TimedOptions(), [](PacketGenerator& gen) {
    gen.Retire(Plain(kBase, 1), 100);                                        // enable
    gen.Retire(Insn(kBase + 1, 2, BranchKind::kCondJump, kBase + 0x10), 110);  // TNT bit
    gen.Retire(Insn(kBase + 0x10, 2, BranchKind::kIndirectJump, kBase + 0x40), 140);
    gen.Retire(Insn(kBase + 0x40, 2, BranchKind::kFarTransfer, 0xffffffff81000000ull), 200);
    gen.Retire(Plain(kBase + 0x42, 1), 301);                                 // re-enable
    // 5000 ticks later: more MTC periods than 8 payload bits tell apart -> TSC + TMA.
    gen.Retire(Insn(kBase + 0x43, 2, BranchKind::kIndirectJump, kBase + 0x80), 5301);
    gen.Flush();
  });
  std::vector<Pkt> want = {
      // PSB+ at 100: TSC, TMA (ART 25, 0 ticks into it), CBR; no CYC yet (counter starts).
      {ppt_psb}, {ppt_tsc, 100}, {ppt_tma, 25, 0}, {ppt_cbr, 10}, {ppt_psbend},
      {ppt_mode, 1, pt_mol_exec}, {ppt_tip_pge, kBase & 0xffffffffffffull, pt_ipc_sext_48},
      // The TNT's CYC is its (only) branch's time, 10 cycles after the enable; then the
      // MTCs of ART edges 112 and 128 (payloads 7, 8), each after a CYC up to its edge,
      // and the TIP's CYC 12 cycles after the last edge.
      {ppt_cyc, 10}, {ppt_tnt_8, 1, 1},
      {ppt_cyc, 2}, {ppt_mtc, 7}, {ppt_cyc, 16}, {ppt_mtc, 8}, {ppt_cyc, 12},
      {ppt_tip, (kBase + 0x40) & 0xffff, pt_ipc_update_16},
      // syscall at 200: edges 144..192, CYC 8, disable.
      {ppt_cyc, 4}, {ppt_mtc, 9}, {ppt_cyc, 16}, {ppt_mtc, 10}, {ppt_cyc, 16}, {ppt_mtc, 11},
      {ppt_cyc, 16}, {ppt_mtc, 12}, {ppt_cyc, 8}, {ppt_tip_pgd, 0, pt_ipc_suppressed},
      // enable at 301: no MTCs for the disabled stretch; CYC 101 (ends the count), TSC,
      // TMA (ART 75 + 1 tick).
      {ppt_cyc, 101}, {ppt_tsc, 301}, {ppt_tma, 75, 1},
      {ppt_mode, 1, pt_mol_exec}, {ppt_tip_pge, (kBase + 0x42) & 0xffff, pt_ipc_update_16},
      // 5301: 312 edges passed: CYC 5000, TSC, TMA (ART 1325 + 1) instead of MTCs.
      {ppt_cyc, 5000}, {ppt_tsc, 5301}, {ppt_tma, 1325, 1},
      {ppt_tip, (kBase + 0x80) & 0xffff, pt_ipc_update_16},
  };
  ExpectPackets(got, want);
}

// libipt's own time keeping (query decoder, the settings meta.json states) follows the
// clock: after each indirect branch the time is exactly when it ran.
TEST(PacketGeneratorTest, LibiptTimeFromMtcAndCycMatchesTheClock) {
  const PacketGeneratorOptions options = TimedOptions();
  std::vector<uint64_t> times;
  MemorySink sink;
  {
    PacketGenerator gen(options, &sink);
    uint64_t t = 1000;
    gen.Retire(Plain(kBase, 1), t);
    uint64_t ip = kBase + 1;
    for (int i = 0; i < 200; ++i) {
      t += 3 + (i * 7919) % 97;  // uneven gaps, some crossing several MTC edges
      const uint64_t target = kBase + 0x100 + 0x10 * (i % 8);
      gen.Retire(Insn(ip, 2, BranchKind::kIndirectJump, target), t);
      times.push_back(t);
      ip = target;
    }
    gen.Finish(ip, t + 5);
  }
  std::vector<uint8_t> bytes = sink.bytes();
  const size_t size = bytes.size();
  bytes.resize(size + 32, 0);
  pt_config config;
  pt_config_init(&config);
  config.begin = bytes.data();
  config.end = bytes.data() + size;
  config.cpuid_0x15_eax = 1;
  config.cpuid_0x15_ebx = options.art_ratio;
  config.mtc_freq = static_cast<uint8_t>(options.mtc_freq);
  config.nom_freq = options.core_ratio;
  pt_query_decoder* decoder = pt_qry_alloc_decoder(&config);
  uint64_t ip = 0;
  int status = pt_qry_sync_forward(decoder, &ip);
  ASSERT_GE(status, 0) << pt_errstr(pt_errcode(status));
  pt_event event;
  while (status & pts_event_pending) status = pt_qry_event(decoder, &event, sizeof(event));
  uint64_t previous = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    uint64_t target = 0;
    status = pt_qry_indirect_branch(decoder, &target);
    ASSERT_GE(status, 0) << i << ": " << pt_errstr(pt_errcode(status));
    uint64_t tsc = 0;
    uint32_t lost_mtc = 0, lost_cyc = 0;
    ASSERT_GE(pt_qry_time(decoder, &tsc, &lost_mtc, &lost_cyc), 0);
    EXPECT_EQ(lost_mtc, 0u);
    EXPECT_EQ(lost_cyc, 0u);
    EXPECT_GE(tsc, previous) << i;
    previous = tsc;
    // The CYC right before each TIP gives its branch's time to the cycle (1 cycle = 1
    // tick here), and the CYCs before MTCs keep libipt's calibration exact.
    EXPECT_EQ(tsc, times[i]) << i;
    while (status & pts_event_pending) status = pt_qry_event(decoder, &event, sizeof(event));
  }
  pt_qry_free_decoder(decoder);
}

}  // namespace
}  // namespace ptd
