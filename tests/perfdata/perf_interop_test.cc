// import perf / export perf on the quipper recordings (real Skylake Intel PT, perf 4.14):
// the trace directory holds the same PT bytes and settings perf recorded, and the
// perf.data we write back is decoded by perf 6.1 into the same branches as the original.

#include <linux/perf_event.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "common/file_util.h"
#include "common/trace_meta.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "perfdata/perf_data_reader.h"
#include "perfdata/perf_exporter.h"
#include "perfdata/perf_format.h"
#include "perfdata/perf_importer.h"
#include "perfdata/sample_id.h"
#include "tests/perfdata/quipper_samples.h"
#include "tests/testing/test_util.h"

namespace ptd::perfdata {
namespace {

using ::ptd::testing::kQuipperFileMode;
using ::ptd::testing::kQuipperPipeMode;
using ::testing::HasSubstr;

// quipper_auxtrace_info.txt was written by samples/tools/perf_aux_extract.py, an
// independent Python walk of the same file: record counts by type and AUX bytes per CPU.
struct ExtractorFacts {
  std::map<int, uint64_t> record_counts;
  std::map<int, uint64_t> aux_bytes_by_cpu;
};

ExtractorFacts ReadExtractorFacts(const std::string& samples) {
  std::ifstream in(samples + "/oracle_outputs/quipper_auxtrace_info.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  ExtractorFacts facts;
  std::smatch m;
  const std::regex counts(R"((\d+): (\d+))");
  const std::string types_line = text.substr(text.find("record types:"));
  for (auto it = std::sregex_iterator(types_line.begin(), types_line.begin() + types_line.find('\n'), counts);
       it != std::sregex_iterator(); ++it) {
    facts.record_counts[std::stoi((*it)[1])] = std::stoull((*it)[2]);
  }
  const std::regex aux(R"(\.cpu(\d+)\.bin (\d+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), aux); it != std::sregex_iterator(); ++it) {
    facts.aux_bytes_by_cpu[std::stoi((*it)[1])] = std::stoull((*it)[2]);
  }
  return facts;
}

// Kernel records in a sideband file, walked by their headers.
uint64_t CountRecords(const std::string& path, uint64_t sample_type, bool sample_id_all) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  EXPECT_TRUE(bytes.ok());
  uint64_t n = 0;
  uint64_t last_time = 0;
  for (uint64_t pos = 0; bytes.ok() && pos < bytes->size();) {
    uint16_t size;
    std::memcpy(&size, bytes->data() + pos + 6, 2);
    EXPECT_GE(size, 8);
    if (size < 8) break;
    SampleId id;
    if (sample_id_all) {
      EXPECT_TRUE(ParseSampleIdTrailer(absl::Span<const uint8_t>(*bytes).subspan(pos, size), sample_type, &id));
      EXPECT_GE(id.time, last_time) << "sideband not in time order at " << pos;
      last_time = id.time;
    }
    pos += size;
    ++n;
  }
  return n;
}

// Reads the file-mode quipper sample into *data and imports it into `trace_dir`.
void ImportQuipper(const std::string& samples, const std::string& trace_dir, PerfData* data,
                   PerfImportResult* result = nullptr) {
  absl::StatusOr<PerfData> read = PerfDataReader::ReadFile(samples + kQuipperFileMode);
  ASSERT_TRUE(read.ok()) << read.status();
  *data = *std::move(read);
  PerfImportOptions options;
  options.out_dir = trace_dir;
  absl::StatusOr<PerfImportResult> imported = ImportPerfData(*data, options);
  ASSERT_TRUE(imported.ok()) << imported.status();
  if (result != nullptr) *result = *std::move(imported);
}

TEST(PerfImportTest, QuipperImportKeepsPtBytesSettingsAndSideband) {
  PTD_REQUIRE_SAMPLES(samples);
  ::ptd::testing::TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  PerfData data;
  PerfImportResult result;
  ASSERT_NO_FATAL_FAILURE(ImportQuipper(samples, trace, &data, &result));
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
  ASSERT_TRUE(meta.ok()) << meta.status();

  // Settings: the README's description of this recording and perf's AUXTRACE_INFO dump.
  EXPECT_EQ(meta->mode, TraceMode::kImported);
  EXPECT_EQ(meta->host.cpu.vendor, "intel");
  EXPECT_EQ(meta->host.cpu.family, 6u);
  EXPECT_EQ(meta->host.cpu.model, 78u);
  EXPECT_EQ(meta->host.cpu.stepping, 3u);
  EXPECT_EQ(meta->host.kernel_release, "4.14.18");
  EXPECT_EQ(meta->pt.pmu_type, 6);
  EXPECT_EQ(meta->pt.config, 0x300e601u);
  EXPECT_EQ(meta->pt.fields.at("tsc"), 1u);
  EXPECT_EQ(meta->pt.fields.at("mtc"), 1u);
  EXPECT_EQ(meta->pt.fields.at("mtc_period"), 3u);
  EXPECT_EQ(meta->pt.fields.at("psb_period"), 3u);
  EXPECT_EQ(meta->pt.fields.at("branch"), 1u);
  EXPECT_EQ(meta->pt.fields.at("noretcomp"), 0u);
  EXPECT_EQ(meta->pt.fields.at("cyc"), 0u);
  EXPECT_FALSE(meta->pt.user_only);  // kernel and user were traced
  EXPECT_EQ(meta->pt.mtc_freq, 3u);
  EXPECT_EQ(meta->pt.nom_freq, 12u);
  EXPECT_EQ(meta->pt.cpuid_0x15_ebx, 100u);
  EXPECT_EQ(meta->pt.cpuid_0x15_eax, 2u);
  EXPECT_EQ(meta->time.time_shift, 31);
  EXPECT_EQ(meta->time.time_mult, 1789569706u);
  EXPECT_EQ(meta->time.time_zero, 18446744041015200657ull);
  EXPECT_TRUE(meta->time.cap_user_time_zero);
  EXPECT_EQ(meta->per, "cpu");
  EXPECT_THAT(meta->command, ::testing::ElementsAre("echo", "Hello, World!"));

  // PT bytes: what the independent extractor pulled out per CPU, byte count and content.
  ExtractorFacts facts = ReadExtractorFacts(samples);
  ASSERT_EQ(facts.aux_bytes_by_cpu.size(), 2u);
  ASSERT_EQ(meta->streams.size(), facts.aux_bytes_by_cpu.size());
  for (const PtStream& s : meta->streams) {
    ASSERT_TRUE(facts.aux_bytes_by_cpu.count(s.cpu)) << s.file;
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(trace + "/" + s.file);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(bytes->size(), facts.aux_bytes_by_cpu[s.cpu]) << s.file;
    ASSERT_EQ(s.chunks.size(), 1u);
    EXPECT_EQ(s.chunks[0].size, bytes->size());
    // A PT stream starts with a PSB (02 82 repeated 8 times).
    for (int i = 0; i < 16; i += 2) {
      EXPECT_EQ((*bytes)[i], 0x02);
      EXPECT_EQ((*bytes)[i + 1], 0x82);
    }
  }

  // Sideband: every kernel record except samples, in time order per file.
  uint64_t expected = 0;
  for (const auto& [type, n] : facts.record_counts) {
    if (type < 64 && type != PERF_RECORD_SAMPLE) expected += n;
  }
  uint64_t written = 0;
  for (const SidebandFile& f : meta->sideband) {
    written += CountRecords(trace + "/" + f.file, f.sample_type, f.sample_id_all);
  }
  EXPECT_EQ(written, expected);
  EXPECT_GT(expected, 200u);
  EXPECT_GT(meta->end_ns, meta->start_ns);

  // The traced binaries are not shipped with the sample, so import names them as missing.
  EXPECT_FALSE(result.missing_binaries.empty());
  bool noted = false;
  for (const std::string& note : meta->notes) noted |= note.find("have no binary") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(PerfImportTest, CliImportsPipeModeAndRejectsCorruptInput) {
  PTD_REQUIRE_SAMPLES(samples);
  ::ptd::testing::TempDir tmp;
  auto ok = ::ptd::testing::RunCommand({PTD_CLI_PATH, "import", "perf", samples + kQuipperPipeMode, "-o", tmp.Sub("pipe")});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("2 PT streams"));
  EXPECT_THAT(ok.err, HasSubstr("not found"));  // binaries of the recording are absent here
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(tmp.Sub("pipe"));
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->pt.pmu_type, 6);

  // A truncated copy: exit status 1 and a message naming the file.
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(samples + kQuipperFileMode);
  ASSERT_TRUE(bytes.ok());
  bytes->resize(bytes->size() / 2);
  const std::string cut = tmp.Sub("cut.data");
  ASSERT_TRUE(WriteFileAtomic(cut, *bytes).ok());
  auto bad = ::ptd::testing::RunCommand({PTD_CLI_PATH, "import", "perf", cut, "-o", tmp.Sub("bad")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("cut.data"));
  EXPECT_FALSE(PathExists(tmp.Sub("bad")));
}

// Lines "ip => addr" that perf script printed for the branches of `perf_data`.
::ptd::testing::CommandResult PerfScriptBranches(const std::string& perf_data, const std::string& buildid_dir) {
  std::vector<std::string> argv = {"/usr/bin/perf"};
  if (!buildid_dir.empty()) argv.insert(argv.end(), {"--buildid-dir", buildid_dir});
  argv.insert(argv.end(), {"script", "-i", perf_data, "--itrace=b", "-F", "ip,addr", "--ns"});
  return ::ptd::testing::RunCommand(argv);
}

std::vector<std::string> BranchLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("=>") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

TEST(PerfExportTest, QuipperRoundTripDecodesToTheSameBranchesInPerf) {
  PTD_REQUIRE_SAMPLES(samples);
  ::ptd::testing::TempDir tmp;
  PerfData original;
  ASSERT_NO_FATAL_FAILURE(ImportQuipper(samples, tmp.Sub("trace"), &original));

  PerfExportOptions options;
  options.trace_dir = tmp.Sub("trace");
  options.output = tmp.Sub("exported.data");
  absl::StatusOr<PerfExportResult> result = ExportPerfData(options);
  ASSERT_TRUE(result.ok()) << result.status();

  // Our reader: same AUXTRACE_INFO and PT bytes per CPU.
  absl::StatusOr<PerfData> exported = PerfDataReader::ReadFile(options.output);
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_TRUE(exported->intel_pt.has_value());
  EXPECT_EQ((*exported->intel_pt)[kWordPmuType], (*original.intel_pt)[kWordPmuType]);
  EXPECT_EQ((*exported->intel_pt)[kWordTimeMult], (*original.intel_pt)[kWordTimeMult]);
  EXPECT_EQ((*exported->intel_pt)[kWordTscCtcRatioN], (*original.intel_pt)[kWordTscCtcRatioN]);
  ASSERT_EQ(exported->aux_buffers.size(), original.aux_buffers.size());
  for (size_t i = 0; i < exported->aux_buffers.size(); ++i) {
    const AuxtraceBuffer& a = exported->aux_buffers[i];
    const AuxtraceBuffer& b = original.aux_buffers[i];
    EXPECT_EQ(a.cpu, b.cpu);
    ASSERT_EQ(a.size, b.size);
    EXPECT_TRUE(std::equal(exported->bytes.begin() + a.payload_offset, exported->bytes.begin() + a.payload_offset + a.size,
                           original.bytes.begin() + b.payload_offset));
  }

  if (access("/usr/bin/perf", X_OK) != 0) GTEST_SKIP() << "/usr/bin/perf (linux-perf) not installed";
  auto theirs = PerfScriptBranches(samples + kQuipperFileMode, "");
  auto ours = PerfScriptBranches(options.output, result->buildid_dir);
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  ASSERT_EQ(theirs.exit_code, 0) << theirs.err;
  // The original also prints its `cycles` samples (no "=>"); we export the PT event only.
  std::vector<std::string> their_branches = BranchLines(theirs.out);
  std::vector<std::string> our_branches = BranchLines(ours.out);
  EXPECT_GT(their_branches.size(), 100u);
  ASSERT_EQ(our_branches.size(), their_branches.size());
  for (size_t i = 0; i < our_branches.size(); ++i) ASSERT_EQ(our_branches[i], their_branches[i]) << "branch " << i;
}

}  // namespace
}  // namespace ptd::perfdata
