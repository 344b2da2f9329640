// `ptrace-direct info` on a trace directory written by the test (TraceDirWriter +
// RecordBuilder, scenario in sideband_test_dir.h); expectations come from that scenario.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/sideband/sideband_test_dir.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

Json FindOne(const Json& array, const std::string& key, const Json& value) {
  for (const Json& item : array) {
    if (item.at(key) == value) return item;
  }
  return Json();
}

TEST(InfoCommandTest, JsonListsThreadsMappingsVdsoStreamsAndLost) {
  testing::TempDir tmp;
  const std::string dir = tmp.Sub("trace");
  ASSERT_TRUE(testing::WriteSidebandTestDir(dir).ok());
  testing::CommandResult r = testing::RunCommand({PTD_CLI_PATH, "info", "--json", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["mode"], "emulated");

  ASSERT_EQ(j["threads"].size(), 3u);
  Json worker = FindOne(j["threads"], "tid", 101);
  EXPECT_EQ(worker["pid"], 100);
  EXPECT_EQ(worker["name"], "worker");
  EXPECT_EQ(worker["exit_ns"], 2500);
  EXPECT_EQ(FindOne(j["threads"], "tid", 100)["name"], "prog");
  EXPECT_EQ(FindOne(j["threads"], "tid", 200)["name"], "child");

  Json dl = FindOne(j["mmaps"], "path", "/usr/lib/libdl-loaded.so");
  ASSERT_FALSE(dl.is_null());
  EXPECT_EQ(dl["pid"], 100);
  EXPECT_EQ(dl["start"], "0x7f0000000000");
  EXPECT_EQ(dl["end"], "0x7f0000003000");
  EXPECT_EQ(dl["pgoff"], "0x1000");
  EXPECT_EQ(dl["time_ns"], 1500);
  Json exe = FindOne(j["mmaps"], "path", "/bin/prog");
  EXPECT_EQ(exe["start"], "0x400000");

  ASSERT_EQ(j["vdso"].size(), 1u);
  EXPECT_EQ(j["vdso"][0]["pid"], 200);
  EXPECT_EQ(j["vdso"][0]["address"], "0x7ffff7fc1000");
  EXPECT_EQ(j["vdso"][0]["path"], "images/vdso.200.so");
  EXPECT_EQ(j["vdso"][0]["dumped"], false);  // the test wrote no dump file

  ASSERT_EQ(j["streams"].size(), 1u);
  EXPECT_EQ(j["streams"][0]["file"], "aux/cpu1.pt");
  EXPECT_EQ(j["streams"][0]["size"], 4096);
  EXPECT_EQ(j["streams"][0]["chunks"][0]["truncated"], true);

  EXPECT_EQ(j["lost"]["records"], 5);
  EXPECT_EQ(j["lost"]["aux_truncated"], 1);
  EXPECT_EQ(j["sideband"].size(), 3u);
  EXPECT_EQ(j["end_reason"], "exit");
}

TEST(InfoCommandTest, TextSummaryNamesThreadsAndMappings) {
  testing::TempDir tmp;
  const std::string dir = tmp.Sub("trace");
  ASSERT_TRUE(testing::WriteSidebandTestDir(dir).ok());
  testing::CommandResult r = testing::RunCommand({PTD_CLI_PATH, "info", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("mode:    emulated"));
  EXPECT_THAT(r.out, HasSubstr("worker"));
  EXPECT_THAT(r.out, HasSubstr("/usr/lib/libdl-loaded.so"));
  EXPECT_THAT(r.out, HasSubstr("0x7ffff7fc1000"));
  EXPECT_THAT(r.out, HasSubstr("5 sideband records"));
}

TEST(InfoCommandTest, CorruptSidebandPrintsWhatItCanThenFailsWithOffset) {
  testing::TempDir tmp;
  const std::string dir = tmp.Sub("trace");
  std::vector<uint8_t> cpu1 = testing::MakeSidebandTestFiles().cpu1;
  cpu1.resize(cpu1.size() - 4);  // cut the last record short
  ASSERT_TRUE(testing::WriteSidebandTestDir(dir, &cpu1).ok());
  testing::CommandResult r = testing::RunCommand({PTD_CLI_PATH, "info", "--json", dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("sideband/cpu1.data"));
  EXPECT_THAT(r.err, HasSubstr("byte offset"));
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["lost"]["sideband_parse_errors"], 1);
  EXPECT_EQ(FindOne(j["threads"], "tid", 101)["name"], "worker");
}

TEST(InfoCommandTest, MissingDirectoryFails) {
  testing::TempDir tmp;
  testing::CommandResult r = testing::RunCommand({PTD_CLI_PATH, "info", tmp.Sub("nope")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("nope"));
}

}  // namespace
}  // namespace ptd
