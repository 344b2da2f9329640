// `ptrace-direct decode perf.data` on the quipper recordings (real Skylake Intel PT,
// perf 4.14): the result is the one of `import perf` then `decode` (same FTF bytes, same
// counts), every PT byte is read, missing binaries are named with their build-ids, the
// temporary trace directory is gone afterwards, and a corrupt file is an error.

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/perfdata/quipper_samples.h"
#include "tests/testing/test_util.h"

namespace ptd::perfdata {
namespace {

using ::ptd::testing::kQuipperFileMode;
using ::ptd::testing::kQuipperPipeMode;
using ::testing::HasSubstr;

std::string ReadText(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

// Decode counts without the times, which differ from run to run: the wall time and the
// CPU times (`..._cpu_ns`, and a parallel decode's per-piece lists of them).
std::string StatsWithoutTime(const std::string& json) {
  return std::regex_replace(
      json, std::regex(R"re("(seconds|[a-z_]*cpu_ns|[a-z_]*cpu_ns_each)": (\[[0-9, ]*\]|[0-9.eE+-]+),? ?)re"), "");
}

uint64_t StatsValue(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": ([0-9]+)"))) return 0;
  return std::stoull(m[1]);
}

size_t EntriesIn(const std::string& dir) {
  size_t n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
    closedir(d);
  }
  return n;
}

// The CLI with a private TMPDIR (to see the temporary import) and HOME (no ~/.debug).
::ptd::testing::CommandResult RunCli(const ::ptd::testing::TempDir& tmp, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/env", "TMPDIR=" + tmp.Sub("scratch"), "HOME=" + tmp.Sub("home"),
                                   PTD_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return ::ptd::testing::RunCommand(argv);
}

void ExpectDirectDecodeEqualsImportThenDecode(const std::string& perf_data) {
  ::ptd::testing::TempDir tmp;
  ASSERT_TRUE(MakeDirs(tmp.Sub("scratch")).ok());
  ASSERT_TRUE(MakeDirs(tmp.Sub("home")).ok());
  auto direct = RunCli(tmp, {"decode", perf_data, "-o", tmp.Sub("direct.ftf"), "--stats-json", tmp.Sub("direct.json")});
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  EXPECT_EQ(EntriesIn(tmp.Sub("scratch")), 0u) << "the temporary trace directory was left behind";

  auto import = RunCli(tmp, {"import", "perf", perf_data, "-o", tmp.Sub("trace")});
  ASSERT_EQ(import.exit_code, 0) << import.err;
  auto decode = RunCli(tmp, {"decode", tmp.Sub("trace"), "-o", tmp.Sub("imported.ftf"), "--stats-json",
                             tmp.Sub("imported.json")});
  ASSERT_EQ(decode.exit_code, 0) << decode.err;

  const std::string direct_stats = ReadText(tmp.Sub("direct.json"));
  EXPECT_EQ(StatsWithoutTime(direct_stats), StatsWithoutTime(ReadText(tmp.Sub("imported.json"))));
  const std::string direct_ftf = ReadText(tmp.Sub("direct.ftf"));
  EXPECT_FALSE(direct_ftf.empty());
  EXPECT_TRUE(direct_ftf == ReadText(tmp.Sub("imported.ftf"))) << "FTF bytes differ";
}

TEST(PerfDecodeTest, FileModePerfDataDecodesLikeImportThenDecode) {
  PTD_REQUIRE_SAMPLES(samples);
  ExpectDirectDecodeEqualsImportThenDecode(samples + kQuipperFileMode);
}

TEST(PerfDecodeTest, PipeModePerfDataDecodesLikeImportThenDecode) {
  PTD_REQUIRE_SAMPLES(samples);
  ExpectDirectDecodeEqualsImportThenDecode(samples + kQuipperPipeMode);
}

TEST(PerfDecodeTest, DirectDecodeReadsEveryPtByteAndNamesMissingBinaries) {
  PTD_REQUIRE_SAMPLES(samples);
  ::ptd::testing::TempDir tmp;
  ASSERT_TRUE(MakeDirs(tmp.Sub("scratch")).ok());
  auto direct = RunCli(tmp, {"decode", samples + kQuipperFileMode, "-o", tmp.Sub("out.ftf"), "--stats-json",
                             tmp.Sub("stats.json"), "--buildid-dir", tmp.Sub("no-such-cache"), "--verbose"});
  ASSERT_EQ(direct.exit_code, 0) << direct.err;

  // AUX bytes per CPU as samples/tools/perf_aux_extract.py (an independent walk) counted them.
  const std::string facts = ReadText(samples + "/oracle_outputs/quipper_auxtrace_info.txt");
  uint64_t aux_bytes = 0;
  const std::regex aux(R"(\.cpu\d+\.bin (\d+))");
  for (auto it = std::sregex_iterator(facts.begin(), facts.end(), aux); it != std::sregex_iterator(); ++it) {
    aux_bytes += std::stoull((*it)[1]);
  }
  ASSERT_GT(aux_bytes, 0u);
  EXPECT_EQ(StatsValue(ReadText(tmp.Sub("stats.json")), "bytes"), aux_bytes);

  // The binaries are not on this machine: with --verbose each user-space one of perf's
  // published build-id list is named with its build-id, and the searched directory is named.
  EXPECT_THAT(direct.err, HasSubstr("66 binaries not found"));
  EXPECT_THAT(direct.err, HasSubstr(tmp.Sub("no-such-cache")));
  std::istringstream buildids(ReadText(samples + kQuipperFileMode + std::string(".buildids")));
  int named = 0;
  for (std::string id, path; buildids >> id >> path;) {
    if (path.rfind("/lib64/", 0) != 0 && path.rfind("/usr/", 0) != 0) continue;
    EXPECT_THAT(direct.err, HasSubstr(path + " (build-id " + id + ";"));
    ++named;
  }
  EXPECT_GE(named, 5);
}

// Without --verbose the whole output fits a screen: one line for the 66 missing
// binaries (the biggest named), one for where they were looked for, the result line.
TEST(PerfDecodeTest, QuipperDecodePrintsAtMostFifteenLines) {
  PTD_REQUIRE_SAMPLES(samples);
  ::ptd::testing::TempDir tmp;
  ASSERT_TRUE(MakeDirs(tmp.Sub("scratch")).ok());
  auto r = RunCli(tmp, {"decode", samples + kQuipperFileMode, "-o", tmp.Sub("out.ftf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string all = r.out + r.err;
  EXPECT_LE(std::count(all.begin(), all.end(), '\n'), 15) << all;
  EXPECT_THAT(r.err, HasSubstr("66 binaries not found (8 decode errors where their code ran): biggest: "));
  EXPECT_THAT(r.err, HasSubstr("/lib64/libc-2.23.so (3.7 MiB)"));
  EXPECT_THAT(r.err, HasSubstr("--verbose lists all"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("/lib64/libdl-2.23.so")));
}

TEST(PerfDecodeTest, CorruptPerfDataIsAnErrorNamingTheFile) {
  PTD_REQUIRE_SAMPLES(samples);
  ::ptd::testing::TempDir tmp;
  ASSERT_TRUE(MakeDirs(tmp.Sub("scratch")).ok());
  const std::string whole = ReadText(samples + kQuipperFileMode);
  ASSERT_GT(whole.size(), 0x8000u);
  const std::string cut = tmp.Sub("cut.perf.data");
  ASSERT_TRUE(WriteFileAtomic(cut, whole.substr(0, 0x8000)).ok());
  auto r = RunCli(tmp, {"decode", cut, "-o", tmp.Sub("out.ftf")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(cut));
  EXPECT_FALSE(PathExists(tmp.Sub("out.ftf")));
  EXPECT_EQ(EntriesIn(tmp.Sub("scratch")), 0u) << "the temporary trace directory was left behind";
}

}  // namespace
}  // namespace ptd::perfdata
