// node (V8) recorded with the Valgrind backend: a JS function called 3000 times appears
// by name, with every call, and the trace decodes with no errors. V8 runs it in two tiers
// (interpreted with its own code copy, then optimized), each named by the runtime; with
// inlining off every call stays a call. Names come from --perf-basic-prof's perf map or
// --perf-prof's jitdump (matched to the captured code by its bytes).
#include <cstdlib>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "gtest/gtest.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd {
namespace {

using ::ptd::testing::DecodedTrace;
using ::ptd::testing::DecodeForTest;
using ::ptd::testing::EmulatedRecordOptions;
using ::ptd::testing::TempDir;

constexpr char kScript[] = R"(function hotFunction(x) { let s = 0; for (let i = 0; i < 10; i++) s += (x * i) % 7; return s; }
let total = 0;
for (let i = 0; i < 3000; i++) total += hotFunction(i);
console.log(total);
)";

std::string FindNode() {
  for (const char* path : {"/usr/bin/node", "/usr/bin/nodejs", "/usr/local/bin/node"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// Records node running the script with `flags` (in a fresh directory: --perf-prof
// writes its jitdump into the working directory) and decodes it.
DecodedTrace RecordNode(const std::vector<std::string>& flags, std::string* dir_out) {
  static TempDir* tmp = new TempDir();
  static int runs = 0;
  const std::string work = tmp->Sub(absl::StrCat("run", ++runs));
  EXPECT_TRUE(MakeDirs(work).ok());
  const std::string script = work + "/hot.js";
  EXPECT_TRUE(WriteFileAtomic(script, std::string_view(kScript)).ok());
  std::vector<std::string> command = {FindNode()};
  command.insert(command.end(), flags.begin(), flags.end());
  command.push_back(script);
  const RecordOptions options = EmulatedRecordOptions(command, work, "valgrind");
  char cwd[4096];
  EXPECT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  EXPECT_EQ(chdir(work.c_str()), 0);
  absl::StatusOr<EmulatedRecordSummary> summary = RecordValgrind(options);
  EXPECT_EQ(chdir(cwd), 0);
  EXPECT_TRUE(summary.ok()) << summary.status();
  *dir_out = options.output_dir;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(options.output_dir);
  if (meta.ok() && !meta->pids.empty()) unlink(absl::StrCat("/tmp/perf-", meta->pids.front(), ".map").c_str());
  absl::StatusOr<DecodedTrace> decoded = DecodeForTest(options.output_dir);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? *decoded : DecodedTrace();
}

uint64_t CallsOfJsFunction(const DecodedTrace& t, const std::string& name) {
  uint64_t calls = 0;
  for (const auto& [function, n] : t.calls) {
    if (absl::StartsWith(function, "JS:") && absl::StrContains(function, absl::StrCat(name, " "))) calls += n;
  }
  return calls;
}

class JitNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindNode().empty()) GTEST_SKIP() << "node is not installed (scripts/setup installs nodejs)";
    std::string why;
    if (!ValgrindAvailable(&why)) GTEST_SKIP() << why;
    // Half a billion instructions decoded by a sanitizer build would take most of CI's
    // time; the plain build runs this test.
    if (std::getenv("PTD_UNDER_SANITIZER") != nullptr) GTEST_SKIP() << "too slow under ASan/UBSan (PTD_UNDER_SANITIZER)";
  }
};

// One recording (node's start-up under Valgrind takes most of a minute to record and
// more to decode): the perf map and the jitdump both written; the jitdump names the code.
TEST_F(JitNodeTest, HotJsFunctionIsNamedWithEveryCallAndNoDecodeErrors) {
  std::string dir;
  const DecodedTrace t = RecordNode(
      {"--perf-basic-prof", "--perf-prof", "--interpreted-frames-native-stack", "--no-turbo-inlining"}, &dir);
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(dir);
  ASSERT_TRUE(meta.ok());
  ASSERT_FALSE(meta->pids.empty());
  EXPECT_TRUE(PathExists(absl::StrCat(dir, "/images/jit-", meta->pids.front(), ".dump")));
  EXPECT_TRUE(PathExists(absl::StrCat(dir, "/images/perf-", meta->pids.front(), ".map")));
  EXPECT_EQ(t.errors, 0u) << (t.error_details.empty() ? "" : t.error_details[0]);
  // Every call, in whichever tier it ran. A tier-up (the interpreted code jumping into
  // the new baseline or optimized code) is a jump between two named functions, which the
  // call-stack model counts as a tail call: at most one per tier.
  const uint64_t calls = CallsOfJsFunction(t, "hotFunction");
  EXPECT_GE(calls, 3000u);
  EXPECT_LE(calls, 3002u);
  EXPECT_GT(t.instructions, 1000000u);
}

}  // namespace
}  // namespace ptd
