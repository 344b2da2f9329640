// `decode --time-axis cycles` through the real binary: emulated recordings with CYC
// (timing normal) and without (timing low, TSC only), read back with `ftf-dump`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <regex>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// ptd_prog_calls recorded with `--timing timing`.
std::unique_ptr<CliRecording> RecordCalls(const std::string& timing) {
  return RecordWithCli({Program("ptd_prog_calls")}, {"--timing", timing});
}

// The largest timestamp of the begin/end records in `ftf-dump` output.
uint64_t LastTimestamp(const std::string& dump) {
  uint64_t last = 0;
  std::regex ts(" (begin|end) ts=([0-9]+) ");
  for (auto it = std::sregex_iterator(dump.begin(), dump.end(), ts); it != std::sregex_iterator(); ++it) {
    uint64_t value = 0;
    if (absl::SimpleAtoi((*it)[2].str(), &value)) last = std::max(last, value);
  }
  return last;
}

struct DecodedOnAxis {
  int exit_code = -1;
  std::string err;
  std::string stats;
  std::string dump;
};

DecodedOnAxis Decode(const CliRecording& rec, const std::string& axis) {
  DecodedOnAxis d;
  std::string out = rec.tmp.Sub(absl::StrCat("out-", axis, ".ftf"));
  std::string stats = rec.tmp.Sub(absl::StrCat("stats-", axis, ".json"));
  auto r = RunCli({"decode", rec.trace, "-o", out, "--time-axis", axis, "--stats-json", stats, "-q"});
  d.exit_code = r.exit_code;
  d.err = r.err;
  d.stats = ReadFileToString(stats).value_or("");
  d.dump = RunCli({"ftf-dump", out}).out;
  return d;
}

TEST(CliCyclesTest, CyclesAxisCountsCycPayloads) {
  std::unique_ptr<CliRecording> rec = RecordCalls("normal");
  ASSERT_TRUE(rec->error.empty()) << rec->error;
  DecodedOnAxis cycles = Decode(*rec, "cycles");
  ASSERT_EQ(cycles.exit_code, 0) << cycles.err;
  EXPECT_THAT(cycles.err, Not(HasSubstr("CYC")));
  int64_t total = JsonNumber(cycles.stats, "cycles");
  ASSERT_GT(total, 0) << cycles.stats;
  EXPECT_THAT(cycles.dump, HasSubstr("\"cycles\": uint64 "));
  // The last slice ends at the stream's last cycle, as the instruction axis's ends at
  // its last instruction.
  EXPECT_EQ(LastTimestamp(cycles.dump), static_cast<uint64_t>(total));
  DecodedOnAxis instructions = Decode(*rec, "instructions");
  ASSERT_EQ(instructions.exit_code, 0) << instructions.err;
  EXPECT_EQ(JsonNumber(instructions.stats, "cycles"), total);
  EXPECT_EQ(LastTimestamp(instructions.dump), static_cast<uint64_t>(JsonNumber(instructions.stats, "instructions")));
  EXPECT_NE(LastTimestamp(instructions.dump), LastTimestamp(cycles.dump));
}

TEST(CliCyclesTest, WithoutCycWarnsAndCountsInstructions) {
  std::unique_ptr<CliRecording> rec = RecordCalls("low");
  ASSERT_TRUE(rec->error.empty()) << rec->error;
  DecodedOnAxis cycles = Decode(*rec, "cycles");
  ASSERT_EQ(cycles.exit_code, 0) << cycles.err;
  EXPECT_THAT(cycles.err, HasSubstr("aux/"));
  EXPECT_THAT(cycles.err, HasSubstr("no CYC packets: its time axis counts instructions"));
  EXPECT_EQ(JsonNumber(cycles.stats, "cycles"), -1) << cycles.stats;
  EXPECT_THAT(cycles.dump, Not(HasSubstr("\"cycles\"")));
  EXPECT_THAT(cycles.dump, HasSubstr("\"instructions\": uint64 "));
  EXPECT_EQ(LastTimestamp(cycles.dump), static_cast<uint64_t>(JsonNumber(cycles.stats, "instructions")));
}

}  // namespace
}  // namespace ptd::testing
