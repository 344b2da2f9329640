// PacketQuery (decoder/packet_query.h) in lockstep with libipt's query decoder: the same
// bytes, the same calls, and every return code, output, offset, sync offset and time
// compared after each call. Streams: the code walker over libc (escapes, overflows,
// TSC/MTC/CYC timing, return compression off, TNT-64), the emulated test programs, the
// real traces of ../shared/samples, and mutated copies of all of them (compared where
// PacketQuery::Accepts says yes). Then the fast flow decoder end to end: it must use
// PacketQuery on these traces (and still equal libipt's block decoder: the other tests).
#include "decoder/packet_query.h"

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
#include "tests/decoder/recorded_program.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using ptd::testing::RunCommand;
using ptd::testing::TempDir;

constexpr char kLibc[] = "/lib/x86_64-linux-gnu/libc.so.6";

struct Lockstep {
  uint64_t calls = 0;
  uint64_t events = 0;
  uint64_t errors = 0;
  std::string difference;  // the first one, empty if none
};

std::string Hex(uint64_t v) { return absl::StrCat("0x", absl::Hex(v)); }

// Runs both query layers over `bytes` with the same calls (`seed` picks between
// conditional and indirect branch queries) until both are past the last PSB or
// `max_calls`; stops at the first difference.
Lockstep RunLockstep(const std::string& bytes, const pt_config& base, uint64_t seed, uint64_t max_calls) {
  Lockstep out;
  std::vector<uint8_t> padded(bytes.begin(), bytes.end());
  padded.resize(bytes.size() + 64, 0);
  pt_config config = base;
  config.begin = padded.data();
  config.end = padded.data() + bytes.size();
  pt_query_decoder* ref = pt_qry_alloc_decoder(&config);
  // With the scan's TNT-8 map when the bytes pass it (as the fast decoder runs it).
  const PacketQuery::Scan scan = PacketQuery::ScanBytes(config);
  PacketQuery ours(config, scan.supported ? &scan : nullptr);
  if (ref == nullptr || !ours.ok()) {
    out.difference = "allocation failed";
    if (ref != nullptr) pt_qry_free_decoder(ref);
    return out;
  }
  std::mt19937_64 random(seed);
  uint64_t call = 0;
  std::string what;
  auto differ = [&](const std::string& detail) {
    uint64_t offset = 0;
    pt_qry_get_offset(ref, &offset);
    out.difference = absl::StrCat("call ", call, " (", what, ") at offset ", offset, ": ", detail);
  };
  // After every call: offsets and time.
  auto compare_state = [&]() -> bool {
    uint64_t a = 0, b = 0;
    int ra = pt_qry_get_offset(ref, &a), rb = ours.GetOffset(&b);
    if (ra != rb || (ra >= 0 && a != b)) {
      differ(absl::StrCat("offset ", ra, "/", a, " vs ", rb, "/", b));
      return false;
    }
    ra = pt_qry_get_sync_offset(ref, &a);
    rb = ours.GetSyncOffset(&b);
    if (ra != rb || (ra >= 0 && a != b)) {
      differ(absl::StrCat("sync offset ", ra, "/", a, " vs ", rb, "/", b));
      return false;
    }
    uint32_t ma = 1, mb = 1, ca = 1, cb = 1;
    ra = pt_qry_time(ref, &a, &ma, &ca);
    rb = ours.Time(&b, &mb, &cb);
    if (ra != rb || a != b || ma != mb || ca != cb) {
      differ(absl::StrCat("time ", ra, "/", a, " vs ", rb, "/", b));
      return false;
    }
    return true;
  };
  auto same_code = [&](int a, int b) -> bool {
    ++call;
    if (a == b) return true;
    differ(absl::StrCat("status ", a, " vs ", b));
    return false;
  };
  // Sync: forward first, after an error alternately forward and to the first PSB at or
  // after the offset before the failed call (the decoders' resync remedy).
  int status = 0;
  uint64_t ip_a = 0, ip_b = 0;
  what = "sync forward";
  int a = pt_qry_sync_forward(ref, &ip_a), b = ours.SyncForward(&ip_b);
  if (!same_code(a, b) || ip_a != ip_b || !compare_state()) {
    if (out.difference.empty()) differ(absl::StrCat("ip ", Hex(ip_a), " vs ", Hex(ip_b)));
    pt_qry_free_decoder(ref);
    return out;
  }
  status = a;
  uint64_t before = 0;
  uint64_t last_sync = UINT64_MAX;
  int resyncs = 0;
  int failed_syncs = 0;
  while (call < max_calls) {
    if (status < 0) {
      ++out.errors;
      if (status == -pte_eos && before >= bytes.size()) break;
      // The first PSB pattern at or after `before`; the same one again: forward.
      const uint8_t psb[] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                             0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};
      auto it = std::search(bytes.begin() + static_cast<long>(std::min<uint64_t>(before, bytes.size())), bytes.end(),
                            psb, psb + sizeof psb);
      const uint64_t target = static_cast<uint64_t>(it - bytes.begin());
      if (resyncs++ % 2 == 0 || it == bytes.end() || target == last_sync) {
        what = "sync forward";
        a = pt_qry_sync_forward(ref, &ip_a);
        b = ours.SyncForward(&ip_b);
      } else {
        what = absl::StrCat("sync set ", target);
        a = pt_qry_sync_set(ref, &ip_a, target);
        b = ours.SyncSet(&ip_b, target);
        last_sync = target;
      }
      if (!same_code(a, b)) break;
      if (ip_a != ip_b) {
        differ(absl::StrCat("ip ", Hex(ip_a), " vs ", Hex(ip_b)));
        break;
      }
      if (!compare_state()) break;
      if (a == -pte_eos) break;
      if (a < 0 && ++failed_syncs > 10000) break;
      status = a;
      continue;
    }
    pt_qry_get_offset(ref, &before);
    if (status & pts_event_pending) {
      pt_event ea, eb;
      std::memset(&ea, 0xa5, sizeof ea);
      std::memset(&eb, 0xa5, sizeof eb);
      what = "event";
      a = pt_qry_event(ref, &ea, sizeof ea);
      b = ours.Event(&eb, sizeof eb);
      if (!same_code(a, b)) break;
      if (std::memcmp(&ea, &eb, sizeof ea) != 0) {
        differ(absl::StrCat("event type ", ea.type, " vs ", eb.type, ", ip_suppressed ", ea.ip_suppressed, " vs ",
                            eb.ip_suppressed, ", tsc ", ea.tsc, " vs ", eb.tsc));
        break;
      }
      ++out.events;
      if (!compare_state()) break;
      status = a;
      continue;
    }
    // Mostly conditional branches (as code has); a rejected query tries the other kind,
    // a few event queries with none pending check that error too.
    const uint64_t pick = random() % 100;
    bool cond = pick < 70;
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (pick >= 98 && attempt == 0) {
        pt_event ea, eb;
        std::memset(&ea, 0, sizeof ea);
        std::memset(&eb, 0, sizeof eb);
        what = "event (none pending)";
        a = pt_qry_event(ref, &ea, sizeof ea);
        b = ours.Event(&eb, sizeof eb);
        if (!same_code(a, b)) break;
        if (a >= 0 && std::memcmp(&ea, &eb, sizeof ea) != 0) {
          differ("event");
          break;
        }
      } else if (cond) {
        int ta = -1, tb = -1;
        what = "cond branch";
        a = pt_qry_cond_branch(ref, &ta);
        b = ours.CondBranch(&tb);
        if (!same_code(a, b)) break;
        if (ta != tb) {
          differ(absl::StrCat("taken ", ta, " vs ", tb));
          break;
        }
      } else {
        ip_a = ip_b = 0x1234;
        what = "indirect branch";
        a = pt_qry_indirect_branch(ref, &ip_a);
        b = ours.IndirectBranch(&ip_b);
        if (!same_code(a, b)) break;
        if (ip_a != ip_b) {
          differ(absl::StrCat("ip ", Hex(ip_a), " vs ", Hex(ip_b)));
          break;
        }
      }
      if (!compare_state()) break;
      if (a != -pte_bad_query) break;
      cond = !cond;
    }
    if (!out.difference.empty()) break;
    status = a;
  }
  out.calls = call;
  pt_qry_free_decoder(ref);
  return out;
}

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

struct Totals {
  uint64_t streams = 0;
  uint64_t calls = 0;
  uint64_t events = 0;
  uint64_t errors = 0;
  uint64_t mutated_compared = 0;
  uint64_t mutated_rejected = 0;
};

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
  totals->calls += run.calls;
  totals->events += run.events;
  totals->errors += run.errors;
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
    totals->calls += mrun.calls;
    totals->events += mrun.events;
    totals->errors += mrun.errors;
  }
}

void Print(const std::string& what, const Totals& t) {
  std::printf("%s: %llu streams, %llu calls compared (%llu events, %llu errors); mutated copies: %llu compared, "
              "%llu not accepted\n",
              what.c_str(), static_cast<unsigned long long>(t.streams), static_cast<unsigned long long>(t.calls),
              static_cast<unsigned long long>(t.events), static_cast<unsigned long long>(t.errors),
              static_cast<unsigned long long>(t.mutated_compared),
              static_cast<unsigned long long>(t.mutated_rejected));
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

CodeWalkerOptions LibcWalk(uint64_t seed, uint64_t instructions) {
  CodeWalkerOptions options;
  options.elf_path = kLibc;
  options.seed = seed;
  options.max_instructions = instructions;
  return options;
}

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
  // MTC/CYC are not supported: such buffers go to libipt.
  CodeWalkerOptions timed = LibcWalk(seed++, 200'000);
  timed.generator.tsc_interval = 1000;
  timed.generator.mtc = true;
  timed.generator.cyc = true;
  std::string bytes = WalkerStream(tmp, timed);
  EXPECT_FALSE(PacketQuery::Accepts(ConfigFor(bytes, PlainConfig())));
  Print("walker", totals);
  EXPECT_GT(totals.calls, 1'000'000u);
  EXPECT_GT(totals.events, 10'000u);
  EXPECT_GT(totals.mutated_compared, 10u);
}

TEST(PacketQueryTest, RecordedProgramsInLockstep) {
  Totals totals;
  const std::pair<const char*, std::vector<std::string>> programs[] = {
      {"ptd_prog_calls", {"--psb-period", "1024"}},
      {"ptd_prog_calls", {"--emulate-overflow-every", "6144"}},
      {"ptd_prog_threads", {"--virtual-cpus", "2"}},
      {"ptd_prog_signal", {}},
      {"ptd_prog_dlopen_swap", {}},
  };
  for (const auto& [program, options] : programs) {
    testing::Recording rec = testing::Record(program, options);
    ASSERT_TRUE(rec.error.empty()) << rec.error;
    for (const std::string& bytes : StreamsOf(rec.trace)) {
      CheckStream(program, bytes, PlainConfig(), 8, &totals);
    }
  }
  Print("recorded programs", totals);
  EXPECT_GT(totals.calls, 10'000u);
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
