// `decode` options for huge traces through the real binary on an emulated recording of
// ptd_prog_calls: usage errors before any work, --summary / --function / --json (and
// ftf-dump's), --min-duration and --window end to end, and progress output only where
// asked for.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "nlohmann/json.hpp"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CliDecodeViewsTest : public SuiteSharedTest<CliDecodeViewsTest, CliRecording> {
 protected:
  static void SetUpTestSuite() {
    shared_ = RecordWithCli({Program("ptd_prog_calls")});
    ASSERT_TRUE(shared_->error.empty()) << shared_->error;
  }

  static CommandResult Decode(std::vector<std::string> extra) {
    std::vector<std::string> argv = {"decode", shared_->trace};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCli(argv);
  }

  static std::string Out(const std::string& name) { return shared_->tmp.Sub(name); }
};

TEST_F(CliDecodeViewsTest, NonsenseValuesAreUsageErrorsBeforeAnyWork) {
  const std::string out = Out("never.ftf");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--min-duration", "3parsecs"}, "--min-duration: '3parsecs': unknown unit 'parsecs'"},
      {{"--min-duration", "-1us"}, "--min-duration: '-1us' is not a duration"},
      {{"--max-depth", "-2"}, "--max-depth"},
      {{"--max-output-size", "lots"}, "--max-output-size: 'lots' is not a size"},
      {{"--max-output-size", "10"}, "at least 4KB"},
      {{"--window", "5ms..2ms"}, "the end must come after the beginning"},
      {{"--window", "5ms"}, "expected BEGIN..END"},
      {{"--window", "1..2", "--window-offset", "0..10"}, "one or the other"},
      {{"--window-offset", "1KB..1furlong"}, "unknown unit"},
      {{"--function", "fib"}, "go with --summary"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"-o", out, "-q"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    CommandResult r = Decode(args);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_THAT(r.err, Not(HasSubstr("decoded")));
    EXPECT_FALSE(PathExists(out)) << c.args[0] << " " << c.args[1];
  }
}

TEST_F(CliDecodeViewsTest, WindowOutsideTheTraceIsAUsageError) {
  CommandResult r = Decode({"-o", Out("w.ftf"), "-q", "--window", "+1000s..+1001s"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("lies outside the trace"));
  EXPECT_THAT(r.err, Not(HasSubstr("decoded")));
}

TEST_F(CliDecodeViewsTest, SummaryListsFunctionsWithLatencyAndTheSlowestCalls) {
  const std::string out = Out("summary.ftf");
  CommandResult text = Decode({"-o", out, "-q", "--summary", "--function", "fib", "--slowest", "3"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("top functions by total time:"));
  EXPECT_THAT(text.out, HasSubstr("p99"));
  // The header names where fib is defined (DWARF of the -g test program).
  EXPECT_THAT(text.out, ::testing::ContainsRegex("slowest calls of fib  \\(.*/prog_calls\\.c:[0-9]+\\):"));

  CommandResult json = Decode({"--summary", "--json", "--function", "fib", "--slowest", "3", "-q"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  nlohmann::json j = nlohmann::json::parse(json.out);
  const nlohmann::json* fib = nullptr;
  for (const nlohmann::json& f : j["functions"]) {
    if (f["name"] == "fib") fib = &f;
  }
  ASSERT_NE(fib, nullptr) << json.out;
  // As many calls as the FTF has fib slices.
  CommandResult dump = RunCli({"ftf-dump", out});
  size_t fib_slices = 0;
  for (size_t at = dump.out.find("name=\"fib\""); at != std::string::npos; at = dump.out.find("name=\"fib\"", at + 1)) {
    ++fib_slices;
  }
  EXPECT_GT(fib_slices, 100u);
  EXPECT_EQ((*fib)["calls"].get<uint64_t>(), fib_slices);
  EXPECT_LE((*fib)["p50_ns"].get<uint64_t>(), (*fib)["p90_ns"].get<uint64_t>());
  EXPECT_LE((*fib)["p99_ns"].get<uint64_t>(), (*fib)["max_ns"].get<uint64_t>());
  ASSERT_EQ(j["slowest"]["calls"].size(), 3u);
  // The slowest call of fib is the outermost one, fib(12): as long as fib's max latency,
  // and its start is a "begin fib" of the FTF written with the same options.
  const nlohmann::json& slowest = j["slowest"]["calls"][0];
  EXPECT_EQ(slowest["duration_ns"].get<uint64_t>(), (*fib)["max_ns"].get<uint64_t>());
  EXPECT_THAT(dump.out, HasSubstr(absl::StrCat("begin ts=", slowest["start_ns"].get<uint64_t>())));

  // ftf-dump reads the same numbers back from the file.
  CommandResult from_file = RunCli({"ftf-dump", "--summary", "--json", "--function", "fib", out});
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  nlohmann::json k = nlohmann::json::parse(from_file.out);
  for (const nlohmann::json& f : k["functions"]) {
    if (f["name"] == "fib") {
      EXPECT_EQ(f["calls"], (*fib)["calls"]);
      EXPECT_EQ(f["total_ns"], (*fib)["total_ns"]);
      EXPECT_EQ(f["self_instructions"], (*fib)["self_instructions"]);
    }
  }
  EXPECT_EQ(k["slowest"]["calls"][0]["start_ns"], slowest["start_ns"]);
}

TEST_F(CliDecodeViewsTest, MinDurationCountsWhatItLeftOut) {
  const std::string out = Out("coarse.ftf");
  const std::string stats = Out("coarse.json");
  // Emulated steps are slow (tens of us per instruction): 1 ms leaves out most calls.
  CommandResult r = Decode({"-o", out, "--min-duration", "1ms", "--stats-json", stats, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("level of detail: left out "));
  nlohmann::json j = nlohmann::json::parse(ReadFileToString(stats).value_or("{}"));
  EXPECT_GT(j["dropped_short"].get<uint64_t>(), 100u);
  CommandResult check = RunCli({"ftf-dump", "--check", out});
  EXPECT_EQ(check.exit_code, 0) << check.out;
}

TEST_F(CliDecodeViewsTest, WindowSaysWhatItDecoded) {
  const std::string out = Out("window.ftf");
  // The recording lasts about 0.8 ms on the emulator's virtual axis.
  CommandResult r = Decode({"-o", out, "--window", "+100us..+300us"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("window: "));
  EXPECT_THAT(r.err, HasSubstr("decoding PT bytes"));
  CommandResult check = RunCli({"ftf-dump", "--check", out});
  EXPECT_EQ(check.exit_code, 0) << check.out;
}

TEST_F(CliDecodeViewsTest, ProgressOnlyOnATerminalOrWhenAsked) {
  // RunCli's stderr is a pipe: no progress line.
  CommandResult quiet = Decode({"-o", Out("p1.ftf")});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_THAT(quiet.err, Not(HasSubstr("\r")));
  CommandResult forced = Decode({"-o", Out("p2.ftf"), "--progress", "-j", "1"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_THAT(forced.err, HasSubstr("\rdecoding ["));
  EXPECT_THAT(forced.err, HasSubstr("decoding: done"));
}

TEST_F(CliDecodeViewsTest, ARejectedDecodeLeavesAnEarlierOutputUntouched) {
  const std::string out = Out("kept.ftf");
  ASSERT_TRUE(WriteFileAtomic(out, std::string_view("an earlier output")).ok());
  CommandResult r = Decode({"-o", out, "-q", "--window", "+1000s..+1001s"});
  ASSERT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(ReadFileToString(out).value_or("<missing>"), "an earlier output");
  CommandResult fresh = Decode({"-o", Out("never_written.ftf"), "-q", "--window", "+1000s..+1001s"});
  EXPECT_EQ(fresh.exit_code, 2) << fresh.err;
  EXPECT_FALSE(PathExists(Out("never_written.ftf")));
  // Nor a temporary file beside it.
  CommandResult listing = RunCommand({"/bin/sh", "-c", "ls " + shared_->tmp.path()});
  EXPECT_THAT(listing.out, Not(HasSubstr(".partial")));
}

TEST_F(CliDecodeViewsTest, AnUnknownTidIsAnErrorThatListsTheThreads) {
  const std::string out = Out("tid.ftf");
  CommandResult r = Decode({"-o", out, "-q", "--tid", "99999999"});
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--tid 99999999: no such thread"));
  EXPECT_THAT(r.err, HasSubstr("its threads: "));
  EXPECT_FALSE(PathExists(out));
  // A tid it lists decodes.
  const std::string listed = r.err.substr(r.err.find("its threads: ") + 13);
  int tid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(listed.substr(0, listed.find_first_of(",\n")), &tid)) << r.err;
  CommandResult ok = Decode({"-o", out, "-q", "--tid", absl::StrCat(tid)});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST_F(CliDecodeViewsTest, AWindowFromAfterTheLastPsbDecodesToTheEnd) {
  // The trace's PSB+ span, from the message of a window outside it.
  CommandResult outside = Decode({"-o", Out("span.ftf"), "-q", "--window", "+1000s..+1001s"});
  const size_t at = outside.err.find("its PSB+ times run from ");
  ASSERT_NE(at, std::string::npos) << outside.err;
  const std::string span = outside.err.substr(at + 24);
  uint64_t last_psb = 0;
  const size_t to = span.find(" to ");
  ASSERT_NE(to, std::string::npos) << span;
  ASSERT_TRUE(absl::SimpleAtoi(span.substr(to + 4, span.find(' ', to + 4) - to - 4), &last_psb)) << span;
  const std::string out = Out("tail.ftf");
  CommandResult r = Decode({"-o", out, "-q", "--window", absl::StrCat(last_psb + 1, "..")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CommandResult check = RunCli({"ftf-dump", "--check", out});
  EXPECT_EQ(check.exit_code, 0) << check.out;
}

TEST(CliTriggerWindowTest, TheWindowInfoSuggestsIsOneDecodeAccepts) {
  // An entry trigger: the call has not returned when the recording stops.
  std::unique_ptr<CliRecording> rec = RecordWithCli({Program("ptd_prog_calls")}, {"--trigger", "fib"});
  ASSERT_TRUE(rec->error.empty()) << rec->error;
  CommandResult info = RunCli({"info", rec->trace});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const size_t at = info.out.find("decode --window ");
  ASSERT_NE(at, std::string::npos) << info.out;
  const std::string window = info.out.substr(at + 16, info.out.find(' ', at + 16) - at - 16);
  CommandResult r = RunCli({"decode", rec->trace, "-o", rec->tmp.Sub("trigger.ftf"), "-q", "--window", window});
  EXPECT_EQ(r.exit_code, 0) << "--window " << window << ": " << r.err;
}

}  // namespace
}  // namespace ptd::testing
