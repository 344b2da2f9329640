// `ptrace-direct info` reads every input `decode` reads, with one model: a perf.data in
// file and pipe mode (the quipper recordings) says what `import perf` then `info DIR`
// says, and an `import raw` trace lists its images.
#include <string>
#include <vector>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::ptd::testing::CommandResult;
using ::ptd::testing::RunCommand;
using ::ptd::testing::TempDir;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// The CLI with a private TMPDIR and HOME (no ~/.debug).
CommandResult RunCli(const TempDir& tmp, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/env", "TMPDIR=" + tmp.Sub("scratch"), "HOME=" + tmp.Sub("home"),
                                   PTD_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

Json InfoJson(const TempDir& tmp, const std::string& input) {
  CommandResult r = RunCli(tmp, {"info", input, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? Json::parse(r.out) : Json::object();
}

void ExpectInfoOfPerfDataEqualsInfoOfItsImport(const std::string& perf_data) {
  TempDir tmp;
  ASSERT_TRUE(MakeDirs(tmp.Sub("scratch")).ok());
  ASSERT_TRUE(MakeDirs(tmp.Sub("home")).ok());
  Json direct = InfoJson(tmp, perf_data);
  ASSERT_TRUE(direct.contains("streams")) << direct.dump();
  EXPECT_EQ(direct["input_kind"], "perf.data");
  EXPECT_EQ(direct["trace_dir"], perf_data);
  EXPECT_EQ(direct["mode"], "imported");
  EXPECT_FALSE(direct["streams"].empty());
  EXPECT_FALSE(direct["threads"].empty());
  EXPECT_FALSE(direct["mmaps"].empty());

  CommandResult import = RunCli(tmp, {"import", "perf", perf_data, "-o", tmp.Sub("trace")});
  ASSERT_EQ(import.exit_code, 0) << import.err;
  Json imported = InfoJson(tmp, tmp.Sub("trace"));
  EXPECT_EQ(imported["input_kind"], "trace_dir");
  // The same model: everything but where it was read from.
  for (const char* key : {"trace_dir", "input_kind"}) {
    direct.erase(key);
    imported.erase(key);
  }
  EXPECT_EQ(direct, imported);

  // Text form: the missing binaries in one line, not one line each.
  CommandResult text = RunCli(tmp, {"info", perf_data});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("mode:    imported"));
  EXPECT_THAT(text.err, HasSubstr("binaries not found: biggest: "));
  EXPECT_LE(std::count(text.err.begin(), text.err.end(), '\n'), 2) << text.err;
}

TEST(CliInfoTest, FileModePerfDataReadsLikeItsImport) {
  PTD_REQUIRE_SAMPLES(samples);
  ExpectInfoOfPerfDataEqualsInfoOfItsImport(samples + "/quipper_perfdata/perf.data.intel_pt-4.14");
}

TEST(CliInfoTest, PipeModePerfDataReadsLikeItsImport) {
  PTD_REQUIRE_SAMPLES(samples);
  ExpectInfoOfPerfDataEqualsInfoOfItsImport(samples + "/quipper_perfdata/perf.data.piped.intel_pt-4.14");
}

// A raw import of 4096 zero bytes as PT with the CLI itself mapped at 0x400000, into
// tmp/`name`: a trace directory to list (its "trace" is never decoded).
void ImportRawListingOnly(const TempDir& tmp, const std::string& name) {
  ASSERT_TRUE(MakeDirs(tmp.Sub("scratch")).ok());
  ASSERT_TRUE(WriteFileAtomic(tmp.Sub("trace.bin"), std::string(4096, '\0')).ok());
  ASSERT_TRUE(WriteFileAtomic(tmp.Sub("maps.txt"), std::string(PTD_CLI_PATH) + " 0x400000\n").ok());
  CommandResult import = RunCli(tmp, {"import", "raw", "--pt", tmp.Sub("trace.bin"), "--maps",
                                      tmp.Sub("maps.txt"), "-o", tmp.Sub(name)});
  ASSERT_EQ(import.exit_code, 0) << import.err;
}

TEST(CliInfoTest, RawImportListsItsImagesAndStream) {
  TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(ImportRawListingOnly(tmp, "trace"));
  Json info = InfoJson(tmp, tmp.Sub("trace"));
  EXPECT_EQ(info["mode"], "imported");
  ASSERT_EQ(info["streams"].size(), 1u) << info.dump();
  EXPECT_EQ(info["streams"][0]["size"], 4096);
  ASSERT_EQ(info["images"].size(), 1u) << info.dump();
  EXPECT_EQ(info["images"][0]["address"], "0x400000");
  EXPECT_EQ(info["images"][0]["present"], true);
}

// The clock line: the default time axis, its resolution and where its time comes from.
TEST(CliInfoTest, ClockLineNamesTheAxisItsResolutionAndItsSource) {
  TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(ImportRawListingOnly(tmp, "raw"));
  CommandResult raw = RunCli(tmp, {"info", tmp.Sub("raw")});
  EXPECT_THAT(raw.out, HasSubstr("clock:   axis instructions (no timing packets)"));

  CommandResult record =
      RunCli(tmp, {"record", "--emulate=ptrace", "-q", "-o", tmp.Sub("emulated"), "--", "/bin/true"});
  ASSERT_EQ(record.exit_code, 0) << record.err;
  CommandResult emulated = RunCli(tmp, {"info", tmp.Sub("emulated")});
  EXPECT_THAT(emulated.out, HasSubstr("clock:   axis ns, resolution every packet (CYC: core cycles)"));
  EXPECT_THAT(emulated.out, HasSubstr("clock virtual (ptrace): 1 ns per retired instruction"));
}

// The recording CPU's errata: an emulated trace was written by no CPU, so an Intel model
// libipt does not know is no reason to warn; a hardware trace from it warns once, not
// once per stream.
TEST(CliDecodeWarningsTest, ErrataWarningOnceForHardwareTracesNeverForEmulatedOnes) {
  TempDir tmp;
  ASSERT_TRUE(MakeDirs(tmp.Sub("scratch")).ok());
  const std::string trace = tmp.Sub("trace");
  CommandResult record = RunCli(tmp, {"record", "--emulate=ptrace", "-q", "-o", trace, "--",
                                      std::string(PTD_BINARY_DIR) + "/tests/programs/ptd_prog_threads"});
  ASSERT_EQ(record.exit_code, 0) << record.err;
  absl::StatusOr<std::string> text = ReadFileToString(trace + "/meta.json");
  ASSERT_TRUE(text.ok()) << text.status();
  Json meta = Json::parse(*text);
  ASSERT_EQ(meta["mode"], "emulated");
  ASSERT_GE(meta["streams"].size(), 2u) << "needs two streams to see a repeated warning";
  meta["host"]["cpu_vendor"] = "intel";
  meta["host"]["cpu_family"] = 6;
  meta["host"]["cpu_model"] = 207;  // newer than libipt 2.0.5 knows
  meta["host"]["cpu_stepping"] = 2;
  ASSERT_TRUE(WriteFileAtomic(trace + "/meta.json", meta.dump(2)).ok());
  CommandResult emulated = RunCli(tmp, {"decode", trace, "-o", tmp.Sub("e.ftf"), "-q"});
  ASSERT_EQ(emulated.exit_code, 0) << emulated.err;
  EXPECT_THAT(emulated.err, ::testing::Not(HasSubstr("errata")));

  meta["mode"] = "hardware";
  ASSERT_TRUE(WriteFileAtomic(trace + "/meta.json", meta.dump(2)).ok());
  for (const char* jobs : {"1", "2"}) {
    CommandResult hardware = RunCli(tmp, {"decode", trace, "-o", tmp.Sub("h.ftf"), "-q", "--jobs", jobs});
    ASSERT_EQ(hardware.exit_code, 0) << hardware.err;
    const std::string warning = "does not know cpu 6/207/2: decoding without errata";
    const size_t first = hardware.err.find(warning);
    EXPECT_NE(first, std::string::npos) << hardware.err;
    EXPECT_EQ(hardware.err.find(warning, first + 1), std::string::npos) << "said twice: " << hardware.err;
  }
}

}  // namespace
}  // namespace ptd
