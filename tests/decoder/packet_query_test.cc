// PacketQuery (decoder/packets/packet_query.h) in lockstep with libipt's query decoder: the same
// bytes, the same calls, and every return code, output, offset, sync offset and time
// compared after each call. Streams: the code walker over libc (escapes, overflows,
// TSC, TMA/MTC/CYC timing, return compression off, TNT-64), the emulated test programs,
// the real traces of ../shared/samples (quipper's Skylake MTC stream among them), and
// mutated copies of all of them (compared where PacketQuery::Accepts says yes); timed
// streams under several timing configs (mtc_freq, nom_freq, CPUID 0x15, CPU errata). Then the fast flow decoder end to end: it must use
// PacketQuery on these traces (and still equal libipt's block decoder: the other tests).
#include "decoder/packets/packet_query.h"

#include <intel-pt.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "decoder/trace_decoder.h"
#include "gtest/gtest.h"
#include "recorder/emulate/code_walker.h"
#include "tests/decoder/decoder_diff.h"
#include "tests/decoder/packet_query_lockstep.h"
#include "tests/decoder/recorded_program.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using ptd::testing::RunCommand;
using ptd::testing::TempDir;
using testing::Lockstep;
using testing::RunLockstep;

using ptd::testing::kLibc;

pt_config PlainConfig() {
  pt_config c;
  pt_config_init(&c);
  return c;
}

// The same with every erratum libipt knows of that changes its query layer.
pt_config ErrataConfig() {
  pt_config c = PlainConfig();
  c.errata.bdm70 = 1;
  c.errata.skd010 = 1;
  c.errata.apl11 = 1;
  c.errata.apl12 = 1;
  return c;
}

pt_config ConfigFor(const std::string& bytes, pt_config base) {
  base.begin = reinterpret_cast<uint8_t*>(const_cast<char*>(bytes.data()));
  base.end = base.begin + bytes.size();
  return base;
}

std::vector<std::string> StreamsOf(const std::string& trace) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(trace + "/aux")) {
    if (entry.path().extension() == ".pt") out.push_back(*ReadFileToString(entry.path().string()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// An index's stretches end to end.
std::vector<PacketQuery::Packed> Flat(const PacketIndex& index) { return index.Unpack(); }

struct Totals {
  uint64_t streams = 0;
  uint64_t calls = 0;
  uint64_t events = 0;
  uint64_t errors = 0;
  uint64_t mutated_compared = 0;
  uint64_t mutated_rejected = 0;
  uint64_t time_changes = 0;
  uint32_t max_lost_mtc = 0;
  uint32_t max_lost_cyc = 0;
};

void Add(const Lockstep& run, Totals* totals) {
  totals->calls += run.calls;
  totals->events += run.events;
  totals->errors += run.errors;
  totals->time_changes += run.time_changes;
  totals->max_lost_mtc = std::max(totals->max_lost_mtc, run.max_lost_mtc);
  totals->max_lost_cyc = std::max(totals->max_lost_cyc, run.max_lost_cyc);
}

// Compares `bytes` in lockstep (it must be accepted) and `mutations` mutated copies
// (where accepted).
void CheckStream(const std::string& name, const std::string& bytes, const pt_config& base, int mutations,
                 Totals* totals, uint64_t max_calls = 50'000'000) {
  std::string copy = bytes;
  ASSERT_TRUE(PacketQuery::Accepts(ConfigFor(copy, base))) << name << ": not accepted";
  Lockstep run = RunLockstep(bytes, base, 1, max_calls);
  EXPECT_EQ(run.difference, "") << name;
  if (getenv("PTD_PQ_VERBOSE")) std::printf("%s: %zu bytes, %llu calls, %llu events, %llu errors\n", name.c_str(), bytes.size(), (unsigned long long)run.calls, (unsigned long long)run.events, (unsigned long long)run.errors);
  ++totals->streams;
  Add(run, totals);
  std::mt19937_64 random(std::hash<std::string>()(name));
  for (int m = 0; m < mutations; ++m) {
    std::string mutated = bytes;
    const int kind = static_cast<int>(random() % 3);
    const int changes = 1 + static_cast<int>(random() % 6);
    for (int c = 0; c < changes && !mutated.empty(); ++c) {
      const size_t at = random() % mutated.size();
      if (kind == 0) {
        mutated[at] = static_cast<char>(mutated[at] ^ (1 << (random() % 8)));
      } else if (kind == 1) {
        mutated.insert(mutated.begin() + static_cast<long>(at), static_cast<char>(random()));
      } else {
        mutated[at] = static_cast<char>(random());
      }
    }
    if (random() % 4 == 0) mutated.resize(random() % (mutated.size() + 1));
    if (!PacketQuery::Accepts(ConfigFor(mutated, base))) {
      ++totals->mutated_rejected;
      continue;
    }
    Lockstep mrun = RunLockstep(mutated, base, 100 + static_cast<uint64_t>(m), max_calls);
    EXPECT_EQ(mrun.difference, "") << name << " mutation " << m;
    ++totals->mutated_compared;
    Add(mrun, totals);
  }
}

void Print(const std::string& what, const Totals& t) {
  std::printf("%s: %llu streams, %llu calls compared (%llu events, %llu errors); mutated copies: %llu compared, "
              "%llu not accepted; time changed %llu times, lost MTC up to %u, lost CYC up to %u\n",
              what.c_str(), static_cast<unsigned long long>(t.streams), static_cast<unsigned long long>(t.calls),
              static_cast<unsigned long long>(t.events), static_cast<unsigned long long>(t.errors),
              static_cast<unsigned long long>(t.mutated_compared),
              static_cast<unsigned long long>(t.mutated_rejected), static_cast<unsigned long long>(t.time_changes),
              t.max_lost_mtc, t.max_lost_cyc);
}

std::string WalkerStream(const TempDir& tmp, const CodeWalkerOptions& options) {
  std::string dir = tmp.Sub(absl::StrCat("walk", options.seed));
  absl::StatusOr<CodeWalkerStats> stats = WriteWalkerTrace(options, dir, true, "");
  EXPECT_TRUE(stats.ok()) << stats.status();
  if (!stats.ok()) return "";
  std::vector<std::string> streams = StreamsOf(dir);
  EXPECT_EQ(streams.size(), 1u);
  return streams.empty() ? "" : streams[0];
}

CodeWalkerOptions LibcWalk(uint64_t seed, uint64_t instructions) { return WalkOptions(kLibc, seed, instructions); }

TEST(PacketQueryTest, WalkerTracesInLockstep) {
  if (!std::filesystem::exists(kLibc)) GTEST_SKIP() << kLibc << " is absent";
  TempDir tmp;
  Totals totals;
  struct Variant {
    const char* name;
    uint64_t overflow_every_bytes;
    uint64_t tsc_interval;
    bool noretcomp;
    bool long_tnt;
    uint64_t psb_period;
  };
  const Variant variants[] = {
      {"plain", 0, 0, false, false, 4096},
      {"overflows", 5000, 0, false, false, 4096},
      {"tsc", 0, 2000, false, true, 4096},
      {"tsc+overflows+noretcomp", 3000, 500, true, false, 1024},
  };
  uint64_t seed = 1;
  for (const Variant& v : variants) {
    CodeWalkerOptions options = LibcWalk(seed++, 1'500'000);
    options.overflow_every_bytes = v.overflow_every_bytes;
    options.generator.tsc_interval = v.tsc_interval;
    options.generator.noretcomp = v.noretcomp;
    options.generator.long_tnt = v.long_tnt;
    options.generator.psb_period = v.psb_period;
    std::string bytes = WalkerStream(tmp, options);
    ASSERT_FALSE(bytes.empty()) << v.name;
    CheckStream(absl::StrCat("walker ", v.name), bytes, PlainConfig(), 12, &totals);
    // BDM70 changes how a PSB+ FUP is read while disabled; the OVF errata refuse.
    std::string copy = bytes;
    const bool has_ovf = v.overflow_every_bytes != 0;
    EXPECT_EQ(PacketQuery::Accepts(ConfigFor(copy, ErrataConfig())), !has_ovf) << v.name;
    pt_config bdm70 = PlainConfig();
    bdm70.errata.bdm70 = 1;
    Lockstep run = RunLockstep(bytes, bdm70, 7, 50'000'000);
    EXPECT_EQ(run.difference, "") << v.name << " (bdm70)";
    totals.calls += run.calls;
  }
  Print("walker", totals);
  EXPECT_GT(totals.calls, 1'000'000u);
  EXPECT_GT(totals.events, 10'000u);
  EXPECT_GT(totals.mutated_compared, 10u);
}

// The configs a stream with TMA/MTC/CYC is compared under: as recorded (`recorded`), and
// variants that take libipt's other time paths: no nominal frequency (CYC waits for two
// MTCs to calibrate), no CPUID 0x15 (MTC and the CYC adjustment give no time), other MTC
// frequencies (TMA as an MTC or not, other wrap-arounds), another crystal ratio, and a
// Skylake CPU's errata (SKL168 calibration skips, SKD007; its SKD010 refuses OVF).
struct NamedConfig {
  std::string name;
  pt_config config;
};
std::vector<NamedConfig> TimingConfigs(const pt_config& recorded) {
  std::vector<NamedConfig> out;
  out.push_back({"recorded", recorded});
  pt_config c = recorded;
  c.nom_freq = 0;
  out.push_back({"nom_freq 0", c});
  c = recorded;
  c.cpuid_0x15_eax = 0;
  c.cpuid_0x15_ebx = 0;
  out.push_back({"no cpuid 0x15", c});
  for (uint8_t freq : {0, 3, 9, 15, 23}) {
    if (freq == recorded.mtc_freq) continue;
    c = recorded;
    c.mtc_freq = freq;
    out.push_back({absl::StrCat("mtc_freq ", freq), c});
  }
  c = recorded;
  c.cpuid_0x15_eax = 3;
  c.cpuid_0x15_ebx = 7;
  c.nom_freq = 37;
  out.push_back({"cpuid 3/7, nom_freq 37", c});
  c = recorded;
  c.cpu.vendor = pcv_intel;
  c.cpu.family = 6;
  c.cpu.model = 0x4e;
  c.cpu.stepping = 3;
  EXPECT_GE(pt_cpu_errata(&c.errata, &c.cpu), 0);
  EXPECT_TRUE(c.errata.skl168 && c.errata.skd007);
  out.push_back({"skylake errata", c});
  return out;
}

// `bytes` under each of TimingConfigs (`mutations` mutated copies under some);
// a config that refuses (Skylake's SKD010 with an OVF) is counted, not compared.
void CheckTimedStream(const std::string& name, const std::string& bytes, const pt_config& recorded, int mutations,
                      Totals* totals, int* refused) {
  int k = 0;
  for (const NamedConfig& variant : TimingConfigs(recorded)) {
    std::string copy = bytes;
    const PacketQuery::Scan scan = PacketQuery::ScanBytes(ConfigFor(copy, variant.config));
    EXPECT_TRUE(scan.supported) << name;
    EXPECT_TRUE(scan.has_timing) << name;
    if (!PacketQuery::Accepts(ConfigFor(copy, variant.config), scan)) {
      EXPECT_TRUE(scan.has_ovf && variant.config.errata.skd010) << name << " (" << variant.name << ") refused";
      ++*refused;
      continue;
    }
    // Mutations under the first configs, and many under Skylake's errata: MTCs dropped
    // or changed by them take SKL168's paths.
    const bool errata = variant.config.errata.skl168;
    CheckStream(absl::StrCat(name, " (", variant.name, ")"), bytes, variant.config,
                errata ? 3 * mutations : k++ < 3 ? mutations : 0, totals);
  }
}

pt_config ConfigOfGenerator(const PacketGeneratorOptions& g) {
  pt_config c = PlainConfig();
  c.mtc_freq = static_cast<uint8_t>(g.mtc_freq);
  c.cpuid_0x15_eax = 1;
  c.cpuid_0x15_ebx = g.art_ratio;
  c.nom_freq = g.core_ratio;
  return c;
}

// The code walker's streams with MTC and CYC (and TMA in each PSB+, TSCs, overflows,
// MTC without CYC): pt_qry's time at every call, and every event's tsc, lost_mtc and
// lost_cyc, under each timing config.
TEST(PacketQueryTest, TimedWalkerTracesInLockstep) {
  if (!std::filesystem::exists(kLibc)) GTEST_SKIP() << kLibc << " is absent";
  TempDir tmp;
  Totals totals;
  int refused = 0;
  struct Variant {
    const char* name;
    bool cyc;
    uint32_t mtc_freq;
    uint64_t tsc_interval;
    uint64_t overflow_every_bytes;
  };
  const Variant variants[] = {
      {"mtc+cyc", true, 8, 0, 0},
      {"mtc+cyc, mtc_freq 2, tsc", true, 2, 3000, 0},
      {"mtc only, mtc_freq 5", false, 5, 0, 0},
      {"mtc+cyc+overflows", true, 6, 1000, 7000},
  };
  uint64_t seed = 40;
  for (const Variant& v : variants) {
    CodeWalkerOptions options = LibcWalk(seed++, 400'000);
    options.generator.mtc = true;
    options.generator.cyc = v.cyc;
    options.generator.mtc_freq = v.mtc_freq;
    options.generator.tsc_interval = v.tsc_interval;
    options.overflow_every_bytes = v.overflow_every_bytes;
    std::string bytes = WalkerStream(tmp, options);
    ASSERT_FALSE(bytes.empty()) << v.name;
    CheckTimedStream(absl::StrCat("walker ", v.name), bytes, ConfigOfGenerator(options.generator), 6, &totals,
                     &refused);
  }
  Print("timed walker", totals);
  EXPECT_EQ(refused, 1);  // Skylake's SKD010 with the overflows
  EXPECT_GT(totals.calls, 1'000'000u);
  EXPECT_GT(totals.time_changes, 100'000u);
  EXPECT_GT(totals.max_lost_cyc, 0u);  // CYCs before the first calibration
  EXPECT_GT(totals.mutated_compared, 10u);
}

// The scan's index holds what libipt's packet decoder reads, packet for packet, on a
// timed stream and mutated copies of it (random bytes make CYCs of all sizes).
TEST(PacketQueryTest, IndexHoldsWhatLibiptsPacketDecoderReads) {
  if (!std::filesystem::exists(kLibc)) GTEST_SKIP() << kLibc << " is absent";
  TempDir tmp;
  CodeWalkerOptions options = LibcWalk(77, 1'000'000);
  options.generator.mtc = true;
  options.generator.cyc = true;
  options.generator.mtc_freq = 1;
  const std::string bytes = WalkerStream(tmp, options);
  ASSERT_FALSE(bytes.empty());
  // Runs of PADs (as hardware pads) between packets, before PSBs and at the end: the scan
  // passes over a run at once.
  std::string padded;
  {
    const pt_config plain = ConfigFor(bytes, PlainConfig());
    pt_packet_decoder* pkt = pt_pkt_alloc_decoder(&plain);
    ASSERT_EQ(pt_pkt_sync_forward(pkt), 0);
    uint64_t from = 0, k = 0;
    for (pt_packet packet; pt_pkt_next(pkt, &packet, sizeof packet) > 0; ++k) {
      uint64_t end = 0;
      pt_pkt_get_offset(pkt, &end);
      padded.append(bytes, from, end - from);
      from = end;
      if (k % 5 == 0) padded.append(k % 7 + 1 + (k % 1000 == 0 ? 300 : 0), '\0');
    }
    pt_pkt_free_decoder(pkt);
    padded.append(bytes, from);
    padded.append(9, '\0');
  }
  std::mt19937_64 random(5);
  uint64_t compared = 0, cycs = 0, mtcs = 0;
  for (int m = 0; m < 20; ++m) {
    std::string stream = m % 2 == 0 ? bytes : padded;
    for (int c = 0; c < m / 2 * 100; ++c) stream[random() % stream.size()] = static_cast<char>(random());
    const pt_config config = ConfigFor(stream, PlainConfig());
    const PacketQuery::Scan scan = PacketQuery::ScanBytes(config);
    if (m < 2) {
      ASSERT_TRUE(scan.supported) << "mutation " << m;
    }
    if (!scan.supported) continue;
    ASSERT_NE(scan.packets, nullptr);
    const std::vector<PacketQuery::Packed> index = Flat(*scan.packets);
    pt_packet_decoder* pkt = pt_pkt_alloc_decoder(&config);
    ASSERT_EQ(pt_pkt_sync_forward(pkt), 0);
    size_t i = 0;
    for (pt_packet packet; pt_pkt_next(pkt, &packet, sizeof packet) > 0;) {
      if (packet.type == ppt_pad) continue;
      uint64_t offset = 0;
      pt_pkt_get_offset(pkt, &offset);
      offset -= packet.size;
      ASSERT_LT(i, index.size()) << "mutation " << m;
      const PacketQuery::Packed& entry = index[i++];
      ASSERT_EQ(entry.offset, offset) << "mutation " << m;
      ASSERT_EQ(entry.size, packet.size) << "mutation " << m << " at " << offset;
      if (packet.type == ppt_cyc) {
        ASSERT_EQ(entry.value, packet.payload.cyc.value) << "mutation " << m << " at " << offset;
        ++cycs;
      } else if (packet.type == ppt_mtc) {
        ASSERT_EQ(entry.aux, packet.payload.mtc.ctc) << "mutation " << m << " at " << offset;
        ++mtcs;
      }
      ++compared;
    }
    pt_pkt_free_decoder(pkt);
    EXPECT_EQ(i, index.size()) << "mutation " << m;
  }
  std::printf("%llu packets compared (%llu CYC, %llu MTC)\n", static_cast<unsigned long long>(compared),
              static_cast<unsigned long long>(cycs), static_cast<unsigned long long>(mtcs));
  EXPECT_GT(cycs, 10'000u);
  EXPECT_GT(mtcs, 1'000u);
}

// One packet as libipt's encoder writes it.
std::string Encoded(pt_packet packet) {
  std::string bytes(64, '\0');
  pt_config config = ConfigFor(bytes, PlainConfig());
  pt_encoder* encoder = pt_alloc_encoder(&config);
  const int size = pt_enc_next(encoder, &packet);
  pt_free_encoder(encoder);
  EXPECT_GT(size, 0) << packet.type;
  bytes.resize(static_cast<size_t>(std::max(size, 0)));
  return bytes;
}

// The other event packets, inserted at packet boundaries of a timed walker stream (in
// PSB+ headers too, and before FUPs they bind to or not), and mutated copies: in
// lockstep. STOP, MNT (in PSB+ an event at PSBEND that is no status update), PWRE and
// PWRX stand alone; EXSTOP and PTW with IP, and MWAIT, bind to the next FUP.
TEST(PacketQueryTest, OtherEventPacketsInLockstep) {
  if (!std::filesystem::exists(kLibc)) GTEST_SKIP() << kLibc << " is absent";
  std::vector<std::string> inserts;
  for (pt_packet_type type : {ppt_stop, ppt_mnt, ppt_exstop, ppt_mwait, ppt_pwre, ppt_pwrx, ppt_ptw}) {
    for (int variant = 0; variant < 4; ++variant) {
      pt_packet packet{};
      packet.type = type;
      packet.payload.mnt.payload = 0x1122334455667788ull;
      if (type == ppt_exstop) packet.payload.exstop.ip = variant & 1;
      if (type == ppt_mwait) {
        packet.payload.mwait.hints = 0x21 + variant;
        packet.payload.mwait.ext = 1;
      }
      if (type == ppt_pwre) {
        packet.payload.pwre.state = 2;
        packet.payload.pwre.sub_state = 1;
        packet.payload.pwre.hw = variant & 1;
      }
      if (type == ppt_pwrx) {
        packet.payload.pwrx.last = 3;
        packet.payload.pwrx.deepest = 5;
        packet.payload.pwrx.interrupt = variant & 1;
        packet.payload.pwrx.store = variant >> 1;
        packet.payload.pwrx.autonomous = 1 - (variant & 1);
      }
      if (type == ppt_ptw) {
        packet.payload.ptw.payload = 0xabcdef01u + variant;
        packet.payload.ptw.plc = static_cast<uint8_t>(variant >> 1);
        packet.payload.ptw.ip = variant & 1;
      }
      inserts.push_back(Encoded(packet));
    }
  }
  TempDir tmp;
  CodeWalkerOptions options = LibcWalk(91, 300'000);
  options.generator.mtc = true;
  options.generator.cyc = true;
  options.overflow_every_bytes = 9000;
  const std::string bytes = WalkerStream(tmp, options);
  ASSERT_FALSE(bytes.empty());
  const PacketQuery::Scan scan = PacketQuery::ScanBytes(ConfigFor(bytes, PlainConfig()));
  ASSERT_NE(scan.packets, nullptr);
  const std::vector<PacketQuery::Packed> index = Flat(*scan.packets);
  std::mt19937_64 random(3);
  std::string with;
  size_t from = 0;
  int inserted = 0;
  for (const PacketQuery::Packed& p : index) {
    if (random() % 30 != 0) continue;
    with.append(bytes, from, p.offset - from);
    with += inserts[random() % inserts.size()];
    ++inserted;
    from = p.offset;
  }
  with.append(bytes, from, std::string::npos);
  ASSERT_GT(inserted, 500);
  Totals totals;
  CheckStream("walker with other event packets", with, ConfigOfGenerator(options.generator), 12, &totals);
  Print("other event packets", totals);
  EXPECT_GT(totals.events, static_cast<uint64_t>(inserted) / 2);
}

// The emulated test programs (MTC, CYC, TMA from the recorder's emulation, overflows):
// in lockstep under each timing config, and the fast decoder reads them through
// PacketQuery and gives libipt's block decoder's FTF.
TEST(PacketQueryTest, EmulatedProgramsWithTimingInLockstep) {
  Totals totals;
  int refused = 0;
  PacketGeneratorOptions recorded;
  recorded.mtc = recorded.cyc = true;
  for (const char* program : {"ptd_prog_calls", "ptd_prog_threads"}) {
    testing::Recording rec = testing::Record(program, {"--emulate-overflow-every", "6144"});
    ASSERT_TRUE(rec.error.empty()) << rec.error;
    std::vector<std::string> streams = StreamsOf(rec.trace);
    ASSERT_FALSE(streams.empty());
    int n = 0;
    for (const std::string& bytes : streams) {
      CheckTimedStream(absl::StrCat(program, " stream ", n++), bytes, ConfigOfGenerator(recorded), 4, &totals,
                       &refused);
    }
    const uint64_t before = PacketQuery::made();
    DecodeOptions options;
    EXPECT_EQ(testing::CompareFastWithLibiptBlock(rec.trace, options), "") << program;
    EXPECT_GT(PacketQuery::made(), before) << program;
  }
  Print("emulated programs", totals);
  EXPECT_GT(totals.time_changes, 1000u);
}

// The real Skylake stream of ../shared/samples/quipper_perfdata (TSC, MTC period 3,
// TMA in PSB+; kernel and user) under its own config (AUXTRACE_INFO: CTC ratio 100/2,
// max non-turbo ratio 12, cpu 6/78/3) and the variants.
TEST(PacketQueryTest, QuipperSkylakeInLockstep) {
  PTD_REQUIRE_SAMPLES(root);
  TempDir tmp;
  auto r = RunCommand({"python3", absl::StrCat(root, "/tools/perf_aux_extract.py"),
                       absl::StrCat(root, "/quipper_perfdata/perf.data.intel_pt-4.14"), tmp.Sub("aux")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  pt_config recorded = PlainConfig();
  recorded.mtc_freq = 3;
  recorded.cpuid_0x15_eax = 2;
  recorded.cpuid_0x15_ebx = 100;
  recorded.nom_freq = 12;
  Totals totals;
  int refused = 0;
  for (const char* file : {"aux.idx0.cpu0.bin", "aux.idx3.cpu3.bin"}) {
    absl::StatusOr<std::string> bytes = ReadFileToString(tmp.Sub(file));
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    CheckTimedStream(file, *bytes, recorded, 20, &totals, &refused);
  }
  Print("quipper", totals);
  EXPECT_EQ(refused, 0);
  EXPECT_GT(totals.time_changes, 100u);
}

// What it does not model goes to libipt: packets libipt does not know,
// a CYC the SKD007 erratum drops, an MTC frequency libipt's shifts overflow on, a decode
// callback, the OVF errata on a stream with OVF.
TEST(PacketQueryTest, RefusesWhatItDoesNotModel) {
  // PSB, PSBEND, then the packet under test (libipt's encoder writes them).
  auto stream_with = [](const std::vector<pt_packet>& packets) {
    std::string bytes(256, '\0');
    pt_config config = ConfigFor(bytes, PlainConfig());
    pt_encoder* encoder = pt_alloc_encoder(&config);
    pt_packet psb{};
    psb.type = ppt_psb;
    pt_packet psbend{};
    psbend.type = ppt_psbend;
    int written = 0;
    for (pt_packet packet : {psb, psbend}) written += pt_enc_next(encoder, &packet);
    for (pt_packet packet : packets) written += pt_enc_next(encoder, &packet);
    pt_free_encoder(encoder);
    bytes.resize(static_cast<size_t>(written));
    return bytes;
  };
  for (pt_packet_type type : {ppt_exstop, ppt_mwait, ppt_pwre, ppt_pwrx, ppt_ptw, ppt_stop, ppt_mnt}) {
    pt_packet packet{};
    packet.type = type;
    std::string bytes = stream_with({packet});
    EXPECT_TRUE(PacketQuery::ScanBytes(ConfigFor(bytes, PlainConfig())).supported) << type;
  }
  {
    // An opcode libipt does not know (extended 0xff).
    std::string bytes = stream_with({}) + std::string("\x02\xff\x00\x00", 4);
    EXPECT_FALSE(PacketQuery::ScanBytes(ConfigFor(bytes, PlainConfig())).supported);
  }
  // A 2-byte CYC whose second byte is an extended opcode, OVF's after it (07 02 f3).
  {
    pt_packet mtc{};
    mtc.type = ppt_mtc;
    std::string bytes = stream_with({mtc}) + std::string("\x07\x02\xf3", 3);
    const PacketQuery::Scan scan = PacketQuery::ScanBytes(ConfigFor(bytes, PlainConfig()));
    ASSERT_TRUE(scan.supported);
    EXPECT_TRUE(scan.has_skd007_cyc);
    pt_config skd007 = ConfigFor(bytes, PlainConfig());
    EXPECT_TRUE(PacketQuery::Accepts(skd007, scan));
    skd007.errata.skd007 = 1;
    EXPECT_FALSE(PacketQuery::Accepts(skd007, scan));
    pt_config freq = ConfigFor(bytes, PlainConfig());
    freq.mtc_freq = 23;
    EXPECT_TRUE(PacketQuery::Accepts(freq, scan));
    freq.mtc_freq = 24;
    EXPECT_FALSE(PacketQuery::Accepts(freq, scan));
  }

  TempDir tmp;
  CodeWalkerOptions walk = LibcWalk(9, 100'000);
  walk.overflow_every_bytes = 4000;
  std::string bytes = WalkerStream(tmp, walk);
  ASSERT_FALSE(bytes.empty());
  pt_config config = ConfigFor(bytes, PlainConfig());
  const PacketQuery::Scan scan = PacketQuery::ScanBytes(config);
  ASSERT_TRUE(scan.supported);
  EXPECT_TRUE(scan.has_ovf);
  EXPECT_TRUE(PacketQuery::Accepts(config, scan));
  for (int erratum = 0; erratum < 3; ++erratum) {
    pt_config errata = config;
    switch (erratum) {  // bit-fields: no conditional lvalue (clang)
      case 0: errata.errata.skd010 = 1; break;
      case 1: errata.errata.apl11 = 1; break;
      default: errata.errata.apl12 = 1; break;
    }
    EXPECT_FALSE(PacketQuery::Accepts(errata, scan)) << erratum;
  }
  pt_config callback = config;
  callback.decode.callback = [](pt_packet_unknown*, const pt_config*, const uint8_t*, void*) { return -pte_bad_opc; };
  EXPECT_FALSE(PacketQuery::Accepts(callback, scan));
}

// The scan in stretches on threads (cut at PSBs) gives what one scan gives: the same
// packets, support and OVF flag, on a long stream and on mutated copies of it (where a
// stretch fails or the stretches do not meet, one scan decides). Its index is kept in
// chunks of at most kIndexChunkPackets, cut anywhere: the query reads across them as
// libipt's does (lockstep), with chunks small enough to cross thousands.
TEST(PacketQueryTest, ScanOnThreadsEqualsOneScan) {
  if (!std::filesystem::exists(kLibc)) GTEST_SKIP() << kLibc << " is absent";
  TempDir tmp;
  CodeWalkerOptions walk = LibcWalk(31, 1'000'000);
  walk.overflow_every_bytes = 50'000;
  const std::string one = WalkerStream(tmp, walk);
  ASSERT_FALSE(one.empty());
  // Streams joined end to end are a stream (each starts with a PSB): long enough to cut.
  std::string bytes;
  while (bytes.size() < 3 * PacketQuery::kMinParallelScanBytes) bytes += one;
  auto same = [](const PacketQuery::Scan& a, const PacketQuery::Scan& b) -> std::string {
    if (a.supported != b.supported) return absl::StrCat("supported ", a.supported, " / ", b.supported);
    if (a.has_ovf != b.has_ovf) return absl::StrCat("has_ovf ", a.has_ovf, " / ", b.has_ovf);
    if ((a.packets == nullptr) != (b.packets == nullptr)) return "one has an index, the other none";
    if (a.packets == nullptr) return "";
    const std::vector<PacketQuery::Packed> pa = Flat(*a.packets), pb = Flat(*b.packets);
    if (pa.size() != pb.size()) return absl::StrCat(pa.size(), " / ", pb.size(), " packets");
    for (size_t i = 0; i < pa.size(); ++i) {
      const PacketQuery::Packed& x = pa[i];
      const PacketQuery::Packed& y = pb[i];
      if (x.offset != y.offset || x.kind != y.kind || x.size != y.size || x.value != y.value || x.aux != y.aux ||
          x.bits != y.bits) {
        return absl::StrCat("packet ", i, " at ", x.offset, " differs");
      }
    }
    return "";
  };
  const PacketQuery::Scan serial = PacketQuery::ScanBytes(ConfigFor(bytes, PlainConfig()), 1);
  ASSERT_TRUE(serial.supported);
  ASSERT_TRUE(serial.has_ovf);
  ASSERT_NE(serial.packets, nullptr);
  const size_t packet_count = Flat(*serial.packets).size();
  constexpr uint64_t kChunk = PacketQuery::kIndexChunkPackets;
  EXPECT_EQ(serial.packets->chunk_count(), (packet_count + kChunk - 1) / kChunk);
  constexpr uint64_t kSmallChunk = 1000;
  for (int threads : {1, 2, 3}) {
    if (threads > 1) {
      const PacketQuery::Scan threaded = PacketQuery::ScanBytes(ConfigFor(bytes, PlainConfig()), threads);
      EXPECT_EQ(same(serial, threaded), "") << threads;
      ASSERT_NE(threaded.packets, nullptr);
      EXPECT_GE(threaded.packets->chunk_count(), static_cast<size_t>(threads));
      EXPECT_EQ(RunLockstep(bytes, PlainConfig(), 7, 50'000'000, threads).difference, "") << threads;
    }
    const PacketQuery::Scan small = PacketQuery::ScanBytes(ConfigFor(bytes, PlainConfig()), threads, kSmallChunk);
    EXPECT_EQ(same(serial, small), "") << threads << " threads, small chunks";
    ASSERT_NE(small.packets, nullptr);
    EXPECT_GE(small.packets->chunk_count(), packet_count / kSmallChunk);
    EXPECT_EQ(RunLockstep(bytes, PlainConfig(), 9, 50'000'000, threads, kSmallChunk).difference, "")
        << threads << " threads, small chunks";
  }
  std::mt19937_64 random(44);
  int unsupported = 0;
  for (int m = 0; m < 12; ++m) {
    std::string mutated = bytes;
    for (int c = 0; c < 1 + m % 4; ++c) mutated[random() % mutated.size()] = static_cast<char>(random());
    const PacketQuery::Scan one_scan = PacketQuery::ScanBytes(ConfigFor(mutated, PlainConfig()), 1);
    if (!one_scan.supported) ++unsupported;
    EXPECT_EQ(same(one_scan, PacketQuery::ScanBytes(ConfigFor(mutated, PlainConfig()), 2)), "") << "mutation " << m;
    if (one_scan.supported) {
      const uint64_t seed = 200 + static_cast<uint64_t>(m);
      EXPECT_EQ(RunLockstep(mutated, PlainConfig(), seed, 50'000'000, 2, kSmallChunk).difference, "") << "mutation " << m;
    }
  }
  std::printf("%zu bytes, %zu packets; %d of 12 mutations unsupported\n", bytes.size(), Flat(*serial.packets).size(),
              unsupported);
}

TEST(PacketQueryTest, SamplesInLockstep) {
  PTD_REQUIRE_SAMPLES(root);
  Totals totals;
  for (const char* dir : {"Unzip", "foo", "mruby"}) {
    std::string bytes = *ReadFileToString(absl::StrCat(root, "/libxdc_experiments/", dir, "/trace"));
    CheckStream(dir, bytes, PlainConfig(), 20, &totals);
    CheckStream(absl::StrCat(dir, " (bdm70)"), bytes, [] {
      pt_config c = PlainConfig();
      c.errata.bdm70 = 1;
      return c;
    }(), 0, &totals);
  }
  TempDir tmp;
  for (const char* file : {"hello", "ovf-01-poc", "uaf-01-poc", "cve-2004-0597-poc"}) {
    std::string raw = tmp.Sub(absl::StrCat(file, ".bin"));
    std::string split = tmp.Sub(absl::StrCat(file, ".split"));
    auto r = RunCommand({"python3", "-c",
                         "import gzip,shutil,sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2],'wb'))",
                         absl::StrCat(root, "/arcus_griffin/", file, ".griffin.gz"), raw});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = RunCommand({"python3", absl::StrCat(root, "/tools/griffin_split.py"), raw, split});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const auto& entry : std::filesystem::directory_iterator(split)) {
      if (entry.path().filename().string().rfind("pt_", 0) != 0) continue;
      std::string bytes = *ReadFileToString(entry.path().string());
      CheckStream(absl::StrCat(file, " ", entry.path().filename().string()), bytes, PlainConfig(), 20, &totals);
    }
  }
  Print("samples", totals);
  EXPECT_GE(totals.streams, 7u);
}

// The fast flow decoder reads these traces through PacketQuery (the differential tests
// of fast_block_decoder_test.cc, samples_test.cc and ground_truth_test.cc then compare
// it with libipt's block decoder), and gives what libipt's block decoder gives.
TEST(PacketQueryTest, FastDecoderUsesIt) {
  if (!std::filesystem::exists(kLibc)) GTEST_SKIP() << kLibc << " is absent";
  TempDir tmp;
  CodeWalkerOptions walk = LibcWalk(5, 300'000);
  walk.overflow_every_bytes = 20000;
  walk.generator.tsc_interval = 1000;
  std::string trace = tmp.Sub("walk");
  ASSERT_TRUE(WriteWalkerTrace(walk, trace, true, "").ok());
  for (int jobs : {1, 2}) {
    const uint64_t before = PacketQuery::made();
    DecodeOptions options;
    options.decoder = DecoderKind::kFast;
    options.jobs = jobs;
    options.piece_bytes = 64 * 1024;
    absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(trace, "", options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_GT(result->stats[Stat::kInstructions], 100'000u);
    EXPECT_GT(PacketQuery::made(), before) << "jobs " << jobs;
  }
  DecodeOptions options;
  EXPECT_EQ(testing::CompareFastWithLibiptBlock(trace, options), "");
  options.axis = TimeAxisChoice::kInstructions;
  EXPECT_EQ(testing::CompareFastWithLibiptBlock(trace, options), "");
}

}  // namespace
}  // namespace ptd::decoder
