// Real Intel PT traces from other projects (../shared/samples): imported with
// `import raw`, decoded by both libipt decoders, compared with the counts libipt's own
// decoder gives (samples/README.md) and, for one sample, instruction by instruction with
// the oracle's output.
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "decoder/model/call_stack_model.h"
#include "decoder/trace_decoder.h"
#include "ftf/ftf_check.h"
#include "gtest/gtest.h"
#include "image/mapped_file.h"
#include "image/module_cache.h"
#include "image/process_image.h"
#include "image/section_cache.h"
#include "decoder/flow/insn_classifier.h"
#include "decoder/packets/packet_query.h"
#include "common/trace_meta.h"
#include "common/trace_dir.h"
#include "tests/decoder/recording_sink.h"
#include "tests/decoder/decoder_diff.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using ptd::testing::RunCommand;
using ptd::testing::TempDir;

struct Sample {
  const char* name;        // oracle_outputs prefix
  const char* source;      // libxdc dir or griffin file
  bool griffin;
  uint64_t instructions;   // samples/README.md
  uint64_t overflows;
};

const Sample kSamples[] = {
    {"xdc_Unzip", "libxdc_experiments/Unzip", false, 149576, 0},
    {"xdc_foo", "libxdc_experiments/foo", false, 117967, 0},
    {"xdc_mruby", "libxdc_experiments/mruby", false, 6334131, 1},
    {"griffin_hello", "arcus_griffin/hello.griffin.gz", true, 147458, 0},
    {"griffin_ovf-01-poc", "arcus_griffin/ovf-01-poc.griffin.gz", true, 106077, 0},
    {"griffin_uaf-01-poc", "arcus_griffin/uaf-01-poc.griffin.gz", true, 177122, 0},
    {"griffin_cve-2004-0597-poc", "arcus_griffin/cve-2004-0597-poc.griffin.gz", true, 472852, 0},
};

// Imports `sample` into tmp/trace with the CLI, as a user would.
std::string ImportSample(const std::string& samples, const Sample& sample, const TempDir& tmp) {
  std::string maps = tmp.Sub("maps.txt");
  std::string pt;
  if (!sample.griffin) {
    std::string dir = absl::StrCat(samples, "/", sample.source);
    EXPECT_TRUE(WriteFileAtomic(maps, absl::StrCat("pages ", dir, "/data.addr ", dir, "/data.dump\n")).ok());
    pt = dir + "/trace";
  } else {
    // Griffin: decompress, split with the samples' own tool, map every code page.
    std::string raw = tmp.Sub("griffin.bin");
    std::string split = tmp.Sub("split");
    auto r = RunCommand({"python3", "-c",
                         "import gzip,shutil,sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2],'wb'))",
                         absl::StrCat(samples, "/", sample.source), raw});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = RunCommand({"python3", absl::StrCat(samples, "/tools/griffin_split.py"), raw, split});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = RunCommand({"python3", "-c",
                    "import os,sys\n"
                    "d=sys.argv[1]\n"
                    "pts=[f for f in sorted(os.listdir(d)) if f.startswith('pt_')]\n"
                    "open(os.path.join(d,'pt_path'),'w').write(pts[0])\n"
                    "with open(sys.argv[2],'w') as m:\n"
                    "  for f in sorted(os.listdir(os.path.join(d,'xpages'))):\n"
                    "    m.write('xpages/%s 0x%s\\n' % (f, f[:-4]))\n",
                    split, tmp.Sub("split/maps.txt")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    maps = tmp.Sub("split/maps.txt");
    pt = absl::StrCat(split, "/", *ReadFileToString(split + "/pt_path"));
  }
  std::string trace = tmp.Sub("trace");
  auto r = RunCommand({PTD_CLI_PATH, "import", "raw", "--pt", pt, "--maps", maps, "-o", trace});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return trace;
}

class Sinks : public ThreadSinkFactory {
 public:
  SliceSink* ForThread(int, int, const std::string&, const std::string&) override {
    sinks_.push_back(std::make_unique<testing::RecordingSink>());
    return sinks_.back().get();
  }
  std::vector<std::unique_ptr<testing::RecordingSink>> sinks_;
};

struct OracleListing {
  std::vector<uint64_t> ips;
  uint64_t errors = 0;
};

// libipt 2.0.5's instruction decoder, one IP per line, errors as "[error @offset: msg]".
OracleListing ReadOracle(const std::string& path) {
  OracleListing listing;
  std::vector<uint64_t>& ips = listing.ips;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return listing;
  char line[256];
  while (gzgets(f, line, sizeof line) != nullptr) {
    uint64_t ip = 0;
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (absl::SimpleHexAtoi(s, &ip)) {
      ips.push_back(ip);
    } else if (s.rfind("[error", 0) == 0) {
      ++listing.errors;
    }
  }
  gzclose(f);
  return listing;
}


class SampleTest : public ::testing::TestWithParam<Sample> {};

TEST_P(SampleTest, DecodesWithLibiptsCountBothWaysIdentically) {
  PTD_REQUIRE_SAMPLES(samples);
  const Sample& sample = GetParam();
  TempDir tmp;
  std::string trace = ImportSample(samples, sample, tmp);

  DecodeOptions options;
  options.axis = TimeAxisChoice::kInstructions;
  Sinks block_sinks, insn_sinks;
  options.decoder = DecoderKind::kBlock;
  absl::StatusOr<DecodeResult> block = DecodeTrace(trace, options, &block_sinks);
  ASSERT_TRUE(block.ok()) << block.status();
  options.decoder = DecoderKind::kInsn;
  absl::StatusOr<DecodeResult> insn = DecodeTrace(trace, options, &insn_sinks);
  ASSERT_TRUE(insn.ok()) << insn.status();

  // The block decoder gives the README's count (libipt's block decoder) with no error.
  EXPECT_EQ(block->stats[Stat::kInstructions], sample.instructions);
  EXPECT_EQ(block->stats[Stat::kErrors], 0u);
  EXPECT_EQ(block->stats[Stat::kOverflows], sample.overflows);
  EXPECT_EQ(block->stats[Stat::kThreads], 1u);
  EXPECT_GT(block->stats[Stat::kCalls], 0u);
  // libipt 2.0.5's instruction decoder fails on three Griffin traces ("trace stream does
  // not match query", in the oracle's listing too): ours must fail exactly as libipt's.
  OracleListing oracle =
      ReadOracle(absl::StrCat(samples, "/oracle_outputs/", sample.name, ".libipt205_insn_ips.txt.gz"));
  ASSERT_FALSE(oracle.ips.empty());
  EXPECT_EQ(insn->stats[Stat::kInstructions], oracle.ips.size());
  EXPECT_EQ(insn->stats[Stat::kErrors], oracle.errors);
  EXPECT_EQ(insn->stats[Stat::kOverflows], sample.overflows);
  ASSERT_EQ(block_sinks.sinks_.size(), 1u);
  ASSERT_EQ(insn_sinks.sinks_.size(), 1u);
  const auto& a = block_sinks.sinks_[0]->lines();
  const auto& b = insn_sinks.sinks_[0]->lines();
  if (oracle.errors == 0) {
    // Both decoders drive the model identically.
    EXPECT_EQ(block->stats[Stat::kCalls], insn->stats[Stat::kCalls]);
    EXPECT_EQ(block->stats[Stat::kReturns], insn->stats[Stat::kReturns]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "slice event " << i;
  } else {
    // Identical until libipt's instruction decoder fails: up to the frames closed there.
    size_t error_at = 0;
    while (error_at < b.size() && b[error_at] != "I decode error") ++error_at;
    ASSERT_LT(error_at, b.size());
    size_t same = 0;
    while (same < a.size() && same < b.size() && a[same] == b[same]) ++same;
    // At most the Ends of the frames open at the error differ.
    EXPECT_GE(same + insn_sinks.sinks_[0]->max_depth(), error_at)
        << "first difference: " << (same < a.size() ? a[same] : "(end)") << " / "
        << (same < b.size() ? b[same] : "(end)");
    EXPECT_GT(same, error_at / 2);
  }
  EXPECT_FALSE(block_sinks.sinks_[0]->unbalanced());
  EXPECT_LE(block_sinks.sinks_[0]->max_depth(), 512u);

  // The product path: FTF that passes the structural checks.
  std::string ftf = tmp.Sub("out.ftf");
  auto r = RunCommand({PTD_CLI_PATH, "decode", trace, "-o", ftf, "--stats-json", tmp.Sub("stats.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::Status check = ftf::CheckFtfFile(ftf);
  EXPECT_TRUE(check.ok()) << check;
  absl::StatusOr<std::string> stats = ReadFileToString(tmp.Sub("stats.json"));
  ASSERT_TRUE(stats.ok());
  EXPECT_NE(stats->find(absl::StrCat("\"instructions\": ", sample.instructions, ",")), std::string::npos) << *stats;
}

// The fast decoder on real hardware traces: libipt's block decoder's output, exactly, on
// both time axes these traces allow (they have no timing packets).
TEST_P(SampleTest, FastDecoderMatchesLibiptBlock) {
  PTD_REQUIRE_SAMPLES(samples);
  TempDir tmp;
  std::string trace = ImportSample(samples, GetParam(), tmp);
  const uint64_t made = PacketQuery::made();
  DecodeOptions options;
  EXPECT_EQ(testing::CompareFastWithLibiptBlock(trace, options), "");
  options.axis = TimeAxisChoice::kInstructions;
  EXPECT_EQ(testing::CompareFastWithLibiptBlock(trace, options), "");
  // The fast decoder read these packets through PacketQuery, not libipt's query decoder.
  EXPECT_GT(PacketQuery::made(), made);
}

INSTANTIATE_TEST_SUITE_P(Samples, SampleTest, ::testing::ValuesIn(kSamples),
                         [](const ::testing::TestParamInfo<Sample>& info) {
                           std::string n = info.param.name;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

// Expands every block into its instructions (the x86 decoder over our own image) and compares
// with the oracle's one-IP-per-instruction listing.
class Expander : public BlockObserver {
 public:
  explicit Expander(image::ProcessImage* image) : classifier_(image) {}
  void OnBlock(uint64_t ip, uint64_t end_ip, uint32_t count) override {
    uint64_t at = ip;
    for (uint32_t i = 0; i < count; ++i) {
      ips.push_back(at);
      if (i + 1 < count) {
        InsnInfo info = classifier_.Classify(at);
        if (info.size == 0) {
          bad = true;
          return;
        }
        at += info.size;
      }
    }
    if (at != end_ip) bad = true;
  }
  std::vector<uint64_t> ips;
  bool bad = false;

 private:
  InsnClassifier classifier_;
};

TEST(SampleOracleTest, ExpandedInstructionAddressesMatchTheOracle) {
  PTD_REQUIRE_SAMPLES(samples);
  for (const Sample& sample : {kSamples[0], kSamples[3]}) {
    TempDir tmp;
    std::string trace = ImportSample(samples, sample, tmp);
    absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
    ASSERT_TRUE(meta.ok());
    image::SectionCache sections;
    image::ModuleCache modules;
    image::ProcessImage image(&sections, &modules, "expand");
    for (const ImageEntry& e : meta->images) {
      image::Mapping m;
      m.path = ResolveTracePath(trace, e.path);
      m.vaddr = e.vaddr;
      m.file_offset = e.file_offset;
      m.size = e.size;
      ASSERT_TRUE(image.AddMapping(m).ok());
    }
    Expander expander(&image);
    Sinks sinks;
    DecodeOptions options;
    options.axis = TimeAxisChoice::kInstructions;
    options.block_observer = &expander;
    ASSERT_TRUE(DecodeTrace(trace, options, &sinks).ok());
    EXPECT_FALSE(expander.bad);
    std::vector<uint64_t> oracle =
        ReadOracle(absl::StrCat(samples, "/oracle_outputs/", sample.name, ".libipt205_insn_ips.txt.gz")).ips;
    ASSERT_EQ(oracle.size(), sample.instructions) << sample.name;
    ASSERT_EQ(expander.ips.size(), oracle.size()) << sample.name;
    size_t mismatches = 0;
    for (size_t i = 0; i < oracle.size(); ++i) mismatches += expander.ips[i] != oracle[i];
    EXPECT_EQ(mismatches, 0u) << sample.name;
  }
}

}  // namespace
}  // namespace ptd::decoder
