// The wall clock of the Valgrind backend (--time=wall) between system calls: the tool
// stamps the time every 1024 blocks, the converter's clock stands between stamps, and the
// decoder spreads the time between two over the instructions between them, so CPU work
// lasts about as long as it ran under the emulator. `work` in tests/programs/prog_naps.c
// runs 1,200 to 3,200 instructions between two sleeps. And meta.json holds the emulated
// and a native rate (`info` says how much the emulator slows CPU work); before, it held
// neither and each instruction counted 1 ns.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/trace_meta.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

using Json = nlohmann::json;

// One function of `decode --summary --json`.
Json FunctionOf(const Json& summary, const std::string& name) {
  for (const Json& f : summary["functions"]) {
    if (f.value("name", "") == name) return f;
  }
  return Json::object();
}

TEST(WallClockTest, CpuWorkLastsAsLongAsItRanUnderTheEmulator) {
  SkipUnlessValgrindRecords();
  if (IsSkipped()) return;
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const std::string program = absl::StrCat(PTD_BINARY_DIR, "/tests/programs/ptd_prog_naps");
  CommandResult r =
      RunCommand({PTD_CLI_PATH, "record", "--emulate=valgrind", "--time=wall", "-q", "-o", trace, "--", program, "60"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
  ASSERT_TRUE(meta.ok()) << meta.status();
  // The converter's measure of CPU work between the stamps, and a native loop's.
  ASSERT_GT(meta->emulated_ps_per_instruction, 0u);
  ASSERT_GT(meta->native_ps_per_instruction, 0u);
  r = RunCommand({PTD_CLI_PATH, "info", trace});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(CPU work slowed by the emulator about "), std::string::npos) << r.out;

  r = RunCommand({PTD_CLI_PATH, "decode", trace, "--summary", "--json", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json summary = Json::parse(r.out, nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << r.out;
  const Json work = FunctionOf(summary, "work");
  ASSERT_EQ(work.value("calls", 0), 60) << work.dump();
  ASSERT_GT(work.value("total_instructions", 0), 60 * 1200);
  // Non-zero durations for nearly every loop (a few may fall between two timing points
  // that the decoder places at the same time).
  const Json histogram = work.value("histogram", Json::array());  // buckets from 0, 100, 1000 ns, ...
  ASSERT_GE(histogram.size(), 2u) << work.dump();
  EXPECT_LE(histogram[0].get<int>(), 6) << "loops of 1,200+ instructions under 100 ns: " << work.dump();
  EXPECT_GT(work.value("p50_ns", 0), 100) << work.dump();
  const Json nap = FunctionOf(summary, "nap");
  EXPECT_GE(nap.value("min_ns", 0), 100'000) << "a 0.1 ms sleep shorter on the wall clock: " << nap.dump();
}

}  // namespace
}  // namespace ptd::testing
