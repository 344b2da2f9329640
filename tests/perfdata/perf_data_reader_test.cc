// The perf.data reader against perf itself: the quipper Intel PT recordings (real
// Skylake hardware, perf 4.14) read by us must list the same records, AUXTRACE_INFO
// values, AUXTRACE buffers and PT packets as `perf report -D` (perf 6.1) printed.

#include <intel-pt.h>
#include <linux/perf_event.h>

#include <algorithm>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "perfdata/perf_data_reader.h"
#include "perfdata/perf_format.h"
#include "tests/perfdata/perf_report_oracle.h"
#include "tests/perfdata/quipper_samples.h"
#include "tests/testing/test_util.h"

namespace ptd::perfdata {
namespace {

using ::ptd::testing::kQuipperFileMode;
using ::ptd::testing::kQuipperPipeMode;
using ::ptd::testing::OraclePacket;
using ::ptd::testing::PerfReportDump;
using ::testing::HasSubstr;

constexpr char kOracle[] = "/oracle_outputs/quipper_perf6.1_report_D.txt.gz";

std::string Hex(uint64_t v) { return absl::StrFormat("0x%x", v); }

// The packet names perf's packet dumper prints, for libipt's packet types.
std::string PerfPacketName(const pt_packet& p) {
  switch (p.type) {
    case ppt_psb: return "PSB";
    case ppt_psbend: return "PSBEND";
    case ppt_fup: return "FUP";
    case ppt_tip: return "TIP";
    case ppt_tip_pge: return "TIP.PGE";
    case ppt_tip_pgd: return "TIP.PGD";
    case ppt_tnt_8:
    case ppt_tnt_64: return "TNT";
    case ppt_mode: return p.payload.mode.leaf == pt_mol_exec ? "MODE.Exec" : "MODE.TSX";
    case ppt_pip: return "PIP";
    case ppt_cbr: return "CBR";
    case ppt_tsc: return "TSC";
    case ppt_tma: return "TMA";
    case ppt_mtc: return "MTC";
    case ppt_cyc: return "CYC";
    case ppt_ovf: return "OVF";
    default: return absl::StrFormat("type%d", static_cast<int>(p.type));
  }
}

// The first word of perf's detail text for the payloads we can compare exactly.
std::string PerfPacketValue(const pt_packet& p) {
  switch (p.type) {
    case ppt_fup:
    case ppt_tip:
    case ppt_tip_pge:
    case ppt_tip_pgd:
      return p.payload.ip.ipc == pt_ipc_suppressed ? "no" : Hex(p.payload.ip.ip);
    case ppt_tnt_8:
    case ppt_tnt_64: {
      std::string bits;
      for (int i = p.payload.tnt.bit_size - 1; i >= 0; --i) bits += ((p.payload.tnt.payload >> i) & 1) ? 'T' : 'N';
      return bits;
    }
    case ppt_pip: return Hex(p.payload.pip.cr3 >> 5);  // perf prints the 47-bit field, libipt cr3 bits
    case ppt_tsc: return Hex(p.payload.tsc.tsc);
    case ppt_mtc: return Hex(p.payload.mtc.ctc);
    case ppt_cbr: return Hex(p.payload.cbr.ratio);
    default: return "";
  }
}

std::string FirstWord(const std::string& s) { return s.substr(0, s.find(' ')); }

// Every non-PAD packet of `bytes`, as libipt's packet decoder sees it.
std::vector<OraclePacket> DecodePackets(const uint8_t* bytes, size_t size) {
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t*>(bytes);
  config.end = const_cast<uint8_t*>(bytes) + size;
  pt_packet_decoder* dec = pt_pkt_alloc_decoder(&config);
  std::vector<OraclePacket> out;
  if (dec == nullptr) return out;
  if (pt_pkt_sync_set(dec, 0) >= 0) {
    for (;;) {
      uint64_t offset = 0;
      pt_pkt_get_offset(dec, &offset);
      pt_packet pkt;
      if (pt_pkt_next(dec, &pkt, sizeof(pkt)) < 0) break;
      if (pkt.type == ppt_pad) continue;
      out.push_back({offset, PerfPacketName(pkt), PerfPacketValue(pkt)});
    }
  }
  pt_pkt_free_decoder(dec);
  return out;
}

PerfData ReadOrDie(const std::string& path) {
  absl::StatusOr<PerfData> data = PerfDataReader::ReadFile(path);
  EXPECT_TRUE(data.ok()) << data.status();
  return data.ok() ? *std::move(data) : PerfData{};
}

// Compares the AUXTRACE buffers, AUXTRACE_INFO fields and packets with a perf dump.
// `perf_stopped_early`: perf printed only the first buffers (see the pipe-mode test).
// `perf_payload_shift`: perf 6.1 reads pipe-mode AUXTRACE payloads that many bytes early.
void ExpectAgreesWithPerf(const PerfData& data, const PerfReportDump& oracle, bool perf_stopped_early = false,
                          uint64_t perf_payload_shift = 0) {
  ASSERT_TRUE(data.intel_pt.has_value());
  const IntelPtInfo& pt = *data.intel_pt;
  // perf's names of the fixed words, by IntelPtWord.
  static constexpr const char* kNames[kIntelPtFixedWords] = {
      "PMU Type",      "Time Shift",    "Time Muliplier",    "Time Zero",
      "Cap Time Zero", "TSC bit",       "NoRETComp bit",     "Have sched_switch",
      "Snapshot mode", "Per-cpu maps",  "MTC bit",           "MTC freq bits",
      "TSC:CTC numerator", "TSC:CTC denominator", "CYC bit", "Max non-turbo ratio",
      "Filter string len."};
  std::map<std::string, uint64_t> ours;
  for (int i = 0; i < kIntelPtFixedWords; ++i) ours[kNames[i]] = pt.words[i];
  for (const auto& [name, value] : ours) {
    auto it = oracle.auxtrace_info.find(name);
    ASSERT_NE(it, oracle.auxtrace_info.end()) << "perf printed no " << name;
    EXPECT_EQ(std::stoull(it->second, nullptr, 0), value) << name;
  }

  if (perf_stopped_early) {
    ASSERT_GE(data.aux_buffers.size(), oracle.auxtrace.size());
    ASSERT_GE(oracle.auxtrace.size(), 1u);
  } else {
    ASSERT_EQ(data.aux_buffers.size(), oracle.auxtrace.size());
  }
  ASSERT_EQ(oracle.packets.size(), oracle.auxtrace.size());
  for (size_t i = 0; i < oracle.auxtrace.size(); ++i) {
    const AuxtraceBuffer& b = data.aux_buffers[i];
    const auto& o = oracle.auxtrace[i];
    EXPECT_EQ(b.size, o.size);
    EXPECT_EQ(b.offset, o.offset);
    EXPECT_EQ(b.reference, o.reference);
    EXPECT_EQ(b.idx, o.idx);
    EXPECT_EQ(b.tid, o.tid);
    EXPECT_EQ(b.cpu, o.cpu);

    std::vector<OraclePacket> packets = DecodePackets(data.bytes.data() + b.payload_offset, b.size);
    std::vector<OraclePacket> expected = oracle.packets[i];
    if (perf_payload_shift > 0) {
      // perf saw [payload - shift, payload + size - shift): compare packets both saw whole
      // (a packet is at most 16 bytes, a PSB).
      const uint64_t limit = b.size - perf_payload_shift - 16;
      std::erase_if(packets, [&](const OraclePacket& p) { return p.offset >= limit; });
      std::erase_if(expected, [&](const OraclePacket& p) { return p.offset < perf_payload_shift; });
      for (OraclePacket& p : expected) p.offset -= perf_payload_shift;
      std::erase_if(expected, [&](const OraclePacket& p) { return p.offset >= limit; });
    }
    size_t compared_values = 0;
    for (size_t k = 0; k < std::min(packets.size(), expected.size()); ++k) {
      ASSERT_EQ(packets[k].offset, expected[k].offset) << "buffer " << i << " packet " << k;
      ASSERT_EQ(packets[k].name, expected[k].name) << "buffer " << i << " @" << Hex(packets[k].offset);
      if (!packets[k].detail.empty()) {
        ASSERT_EQ(packets[k].detail, FirstWord(expected[k].detail))
            << "buffer " << i << " " << packets[k].name << " @" << Hex(packets[k].offset);
        ++compared_values;
      }
    }
    ASSERT_EQ(packets.size(), expected.size()) << "buffer " << i;
    EXPECT_GT(compared_values, packets.size() / 2);
  }
}

TEST(PerfDataReaderTest, FileModeRecordsMatchPerfReportDump) {
  PTD_REQUIRE_SAMPLES(samples);
  PerfData data = ReadOrDie(samples + kQuipperFileMode);
  PerfReportDump oracle = ::ptd::testing::ParsePerfReportDump(::ptd::testing::ReadMaybeGzip(samples + kOracle));
  ASSERT_FALSE(oracle.records.empty());
  EXPECT_FALSE(data.pipe_mode);

  // Every record perf walked, in order, at the same offset with the same size and type.
  std::vector<testing::OracleRecord> ours;
  size_t r = 0, a = 0;
  while (r < data.records.size() || a < data.aux_buffers.size()) {
    // Records are split into two lists; interleave them back by file offset. perf's
    // own header records (TIME_CONV, AUXTRACE_INFO ...) are not in `records`.
    const bool take_aux = r == data.records.size() ||
                          (a < data.aux_buffers.size() && data.aux_buffers[a].record_offset < data.records[r].file_offset);
    if (take_aux) {
      ours.push_back({data.aux_buffers[a].record_offset, kAuxtraceRecordSize, kRecordAuxtrace});
      ++a;
    } else {
      ours.push_back({data.records[r].file_offset, data.records[r].size, data.records[r].type});
      ++r;
    }
  }
  std::vector<testing::OracleRecord> expected;
  uint64_t header_records = 0;
  for (const auto& rec : oracle.records) {
    if (rec.type >= kRecordHeaderAttr && rec.type != kRecordAuxtrace) {
      ++header_records;
      continue;
    }
    expected.push_back(rec);
  }
  // perf -D prints records in delivery (time) order; compare in file order.
  std::sort(expected.begin(), expected.end(),
            [](const testing::OracleRecord& x, const testing::OracleRecord& y) { return x.offset < y.offset; });
  ASSERT_EQ(ours.size(), expected.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    ASSERT_EQ(ours[i].offset, expected[i].offset) << "record " << i;
    EXPECT_EQ(ours[i].size, expected[i].size) << "record " << i;
    EXPECT_EQ(ours[i].type, expected[i].type) << "record " << i;
  }
  uint64_t counted = 0;
  for (const auto& [type, n] : data.record_counts) counted += n;
  EXPECT_EQ(counted, oracle.records.size());
  EXPECT_GT(header_records, 0u);
  ExpectAgreesWithPerf(data, oracle);
}

TEST(PerfDataReaderTest, FileModeHeaderMatchesPerfHeaderOnly) {
  PTD_REQUIRE_SAMPLES(samples);
  PerfData data = ReadOrDie(samples + kQuipperFileMode);
  // Values as `perf report --header-only` (perf 6.1) prints them for this file.
  EXPECT_EQ(data.features.hostname, "localhost");
  EXPECT_EQ(data.features.os_release, "4.14.18");
  EXPECT_EQ(data.features.arch, "x86_64");
  EXPECT_EQ(data.features.cpuid, "GenuineIntel,6,78,3");
  EXPECT_EQ(data.features.cpu_desc, "Intel(R) Core(TM) m7-6Y75 CPU @ 1.20GHz");
  EXPECT_EQ(data.features.nr_cpus_online, 4u);
  EXPECT_EQ(data.features.nr_cpus_available, 4u);
  EXPECT_EQ(data.features.total_mem_kb, 16299868u);
  EXPECT_THAT(data.features.cmdline,
              ::testing::ElementsAre("/usr/bin/perf", "record", "-e", "cycles", "-e", "intel_pt//", "-o",
                                     "/tmp/perf.data.intel_pt-4.14", "--", "echo", "Hello, World!"));
  EXPECT_EQ(data.features.pmu_mappings.at(6), "intel_pt");
  EXPECT_EQ(data.features.pmu_mappings.at(5), "breakpoint");
  ASSERT_EQ(data.attrs.size(), 4u);
  EXPECT_EQ(data.attrs[0].name, "intel_pt//");
  EXPECT_EQ(data.attrs[0].type, 6u);
  EXPECT_EQ(data.attrs[0].config, 0x300e601u);
  EXPECT_EQ(data.attrs[0].sample_type, uint64_t{PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                                PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER});
  EXPECT_THAT(data.attrs[0].ids, ::testing::ElementsAre(124, 125, 126, 127));
  EXPECT_EQ(data.attrs[1].name, "cycles");
  EXPECT_THAT(data.attrs[3].ids, ::testing::ElementsAre(136, 137, 138, 139));
  EXPECT_TRUE(data.attrs[2].context_switch);
  EXPECT_TRUE(data.attrs[0].sample_id_all);

  // Build-ids agree with the .buildids listing published next to the file (perf buildid-list).
  std::string listing = ::ptd::testing::ReadMaybeGzip(samples + kQuipperFileMode + std::string(".buildids"));
  ASSERT_FALSE(listing.empty());
  size_t lines = 0;
  for (char c : listing) lines += c == '\n';
  EXPECT_EQ(data.features.build_ids.size(), lines);
  for (const BuildIdEntry& e : data.features.build_ids) {
    EXPECT_THAT(listing, HasSubstr(e.build_id + " " + e.filename + "\n"));
  }
  // Every kernel record was attributed to an attr through its sample id.
  for (const RecordRef& rec : data.records) EXPECT_GE(rec.attr_index, 0) << "record at " << rec.file_offset;
}

TEST(PerfDataReaderTest, PipeModeMatchesLivePerfReportDump) {
  PTD_REQUIRE_SAMPLES(samples);
  if (access("/usr/bin/perf", X_OK) != 0) GTEST_SKIP() << "/usr/bin/perf (linux-perf) not installed";
  const std::string path = samples + kQuipperPipeMode;
  ::ptd::testing::CommandResult perf = ::ptd::testing::RunCommand({"/usr/bin/perf", "report", "-D", "-i", path});
  ASSERT_EQ(perf.exit_code, 0) << perf.err;
  PerfReportDump oracle = ::ptd::testing::ParsePerfReportDump(perf.out);
  PerfData data = ReadOrDie(path);
  EXPECT_TRUE(data.pipe_mode);
  // In pipe mode attrs and features arrive as records.
  EXPECT_EQ(data.attrs.size(), data.record_counts[kRecordHeaderAttr]);
  EXPECT_GE(data.attrs.size(), 2u);
  EXPECT_EQ(data.features.cpuid, "GenuineIntel,6,78,3");
  // perf 6.1 reads pipe-mode AUXTRACE payloads 16 bytes early (the size of the pipe
  // header: its dump of buffer 0 starts with the record's own idx/tid/cpu words, then the
  // PSB at "offset 0x10"), so it loses its place after the first payload and stops
  // ("bad event header size") although it exits 0.
  // We walk the whole stream and must end exactly at EOF, so compare what perf did print.
  // perf counts pipe offsets from the end of the 16-byte header and prints
  // HEADER_FEATURE records at their end; other records must be ours, same size and type.
  std::map<uint64_t, std::pair<uint64_t, uint32_t>> ours;
  for (const RecordRef& rec : data.records) ours[rec.file_offset] = {rec.size, rec.type};
  for (const AuxtraceBuffer& b : data.aux_buffers) ours[b.record_offset] = {kAuxtraceRecordSize, kRecordAuxtrace};
  size_t matched = 0;
  for (const auto& rec : oracle.records) {
    if (rec.type >= kRecordHeaderAttr && rec.type != kRecordAuxtrace) continue;
    auto it = ours.find(rec.offset + kPipeHeaderSize);
    ASSERT_NE(it, ours.end()) << "perf printed a record at pipe offset " << Hex(rec.offset);
    EXPECT_EQ(it->second.first, rec.size);
    EXPECT_EQ(it->second.second, rec.type);
    ++matched;
  }
  EXPECT_GT(matched, 400u);
  EXPECT_EQ(data.aux_buffers.size(), 2u);
  ExpectAgreesWithPerf(data, oracle, /*perf_stopped_early=*/true, /*perf_payload_shift=*/kPipeHeaderSize);
}

TEST(PerfDataReaderTest, TruncationIsAnErrorNamingFileOffsetAndRecord) {
  PTD_REQUIRE_SAMPLES(samples);
  PerfData data = ReadOrDie(samples + kQuipperFileMode);
  ASSERT_FALSE(data.aux_buffers.empty());
  // Cut the pipe file in the middle of an AUXTRACE payload.
  PerfData pipe = ReadOrDie(samples + kQuipperPipeMode);
  ASSERT_FALSE(pipe.aux_buffers.empty());
  const AuxtraceBuffer& b = pipe.aux_buffers[0];
  std::vector<uint8_t> cut(pipe.bytes.begin(), pipe.bytes.begin() + b.payload_offset + b.size / 2);
  absl::StatusOr<PerfData> bad = PerfDataReader::Parse(cut, "cut.data");
  ASSERT_FALSE(bad.ok());
  const std::string msg(bad.status().message());
  EXPECT_THAT(msg, HasSubstr("cut.data"));
  EXPECT_THAT(msg, HasSubstr(Hex(b.record_offset)));
  EXPECT_THAT(msg, HasSubstr("PERF_RECORD_AUXTRACE"));

  // A record whose size field points past the end.
  std::vector<uint8_t> bytes = data.bytes;
  const uint64_t rec = data.records[3].file_offset;
  bytes[rec + 6] = 4;
  bytes[rec + 7] = 0;
  bad = PerfDataReader::Parse(bytes, "big.data");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(Hex(rec)));

  EXPECT_FALSE(PerfDataReader::Parse({1, 2, 3}, "tiny").ok());
  EXPECT_THAT(std::string(PerfDataReader::Parse(std::vector<uint8_t>(200, 0), "zeros").status().message()),
              HasSubstr("PERFILE2"));
}

}  // namespace
}  // namespace ptd::perfdata
