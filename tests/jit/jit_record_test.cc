// JIT code recorded by each emulation backend: tests/programs/prog_jit.c writes four
// functions into anonymous executable memory, calls them, writes another function over
// one and moves one (calls, exactly: jit_square 15, jit_square_plus_one 5, jit_negate 7
// at jit_square's address, jit_triple 7 of which 4 after its move), and describes them
// in a jitdump and a perf map. The emulators capture the code as it runs; the decoder
// names it from the jitdump (or the perf map), and damaged JIT files only cost warnings.
#include <cstdlib>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "gtest/gtest.h"
#include "image/jitdump.h"
#include "recorder/emulate/emulated_recorder.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd {
namespace {

using ::ptd::testing::DecodedTrace;
using ::ptd::testing::DecodeForTest;
using ::ptd::testing::TempDir;

const std::string kProgram = std::string(PTD_BINARY_DIR) + "/tests/programs/ptd_prog_jit";

struct Recording {
  std::string dir;
  int pid = 0;
  std::string error;
};

// One recording per backend, program arguments and time axis, shared by the tests (the
// ptrace emulator takes seconds per run).
const Recording& Record(const std::string& backend, const std::vector<std::string>& args, bool wall_clock = false) {
  static TempDir* tmp = new TempDir();
  static std::map<std::string, Recording>* cache = new std::map<std::string, Recording>();
  std::string key = backend + (wall_clock ? " wall" : "");
  for (const std::string& a : args) key += a;
  auto found = cache->find(key);
  if (found != cache->end()) return found->second;
  Recording& rec = (*cache)[key];
  RecordOptions options;
  options.command = {kProgram};
  options.command.insert(options.command.end(), args.begin(), args.end());
  options.output_dir = tmp->Sub(absl::StrCat("trace", cache->size(), ".dir"));
  options.emulate = true;
  options.emulator = backend;
  options.quiet = true;
  options.wall_clock = wall_clock;
  absl::StatusOr<EmulatedRecordSummary> summary =
      backend == "valgrind" ? RecordValgrind(options) : RecordEmulated(options);
  if (!summary.ok()) {
    rec.error = std::string(summary.status().message());
    return rec;
  }
  rec.dir = options.output_dir;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(rec.dir);
  if (meta.ok() && !meta->pids.empty()) rec.pid = meta->pids.front();
  // The program leaves its JIT files in /tmp, as runtimes do; the trace has copies.
  unlink(absl::StrCat("/tmp/jit-", rec.pid, ".dump").c_str());
  unlink(absl::StrCat("/tmp/perf-", rec.pid, ".map").c_str());
  return rec;
}

// A copy of a recording to damage.
std::string CopyOf(const Recording& rec, const TempDir& tmp) {
  const std::string copy = tmp.Sub("copy.dir");
  EXPECT_EQ(system(absl::StrCat("cp -r '", rec.dir, "' '", copy, "'").c_str()), 0);
  return copy;
}

std::string ImagePath(const std::string& dir, const std::string& name, int pid, const std::string& ext) {
  return absl::StrCat(dir, "/images/", name, pid, ext);
}

uint64_t Calls(const DecodedTrace& t, const std::string& name) {
  auto it = t.calls.find(name);
  return it == t.calls.end() ? 0 : it->second;
}

bool HasWarning(const DecodedTrace& t, const std::string& part) {
  for (const std::string& w : t.warnings) {
    if (absl::StrContains(w, part)) return true;
  }
  return false;
}

// Without the jitdump there is no JIT code (its bytes come from the code-load records):
// the program's own code decodes, and each entry into JIT code is an error after which
// the decode resumes at the next PSB. What ran until then is lost with it, an `emit` call
// too when the timing packets put the PSB after it (they vary with the machine's load:
// under `ctest -j2`, 3 of 4 calls in about one run in three).
void ExpectOwnCodeDecodesWithoutJitCode(const DecodedTrace& t) {
  EXPECT_EQ(Calls(t, "jit_square"), 0u);
  EXPECT_GT(t.errors, 0u);
  EXPECT_GE(Calls(t, "emit"), 1u);
  EXPECT_LE(Calls(t, "emit"), 4u);
}

DecodedTrace Decode(const std::string& dir) {
  absl::StatusOr<DecodedTrace> decoded = DecodeForTest(dir);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? *decoded : DecodedTrace();
}

void ExpectExactJitCalls(const DecodedTrace& t) {
  EXPECT_EQ(t.errors, 0u) << (t.error_details.empty() ? "" : t.error_details[0]);
  EXPECT_EQ(Calls(t, "jit_square"), 15u);
  EXPECT_EQ(Calls(t, "jit_square_plus_one"), 5u);
  EXPECT_EQ(Calls(t, "jit_negate"), 7u);
  EXPECT_EQ(Calls(t, "jit_triple"), 7u);
}

class JitRecordTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "valgrind") {
      std::string why;
      if (!ValgrindAvailable(&why)) GTEST_SKIP() << why;
    }
  }
};

TEST_P(JitRecordTest, JitFunctionsAreNamedFromTheJitdumpWithExactCalls) {
  const Recording& rec = Record(GetParam(), {});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  EXPECT_TRUE(PathExists(ImagePath(rec.dir, "jit-", rec.pid, ".dump")));
  EXPECT_TRUE(PathExists(ImagePath(rec.dir, "perf-", rec.pid, ".map")));
  EXPECT_TRUE(PathExists(ImagePath(rec.dir, "jit-capture-", rec.pid, ".dump")));
  ExpectExactJitCalls(Decode(rec.dir));
}

TEST_P(JitRecordTest, CapturedCodeDecodesWithoutJitdumpOrPerfMap) {
  const Recording& rec = Record(GetParam(), {"--no-jitdump", "--no-perf-map"});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  EXPECT_FALSE(PathExists(ImagePath(rec.dir, "jit-", rec.pid, ".dump")));
  const DecodedTrace t = Decode(rec.dir);
  EXPECT_EQ(t.errors, 0u) << (t.error_details.empty() ? "" : t.error_details[0]);
  // Unnamed: by offset from the lowest captured address. jit_square and jit_negate
  // share theirs.
  EXPECT_EQ(Calls(t, "[jit]+0x0"), 22u);
  EXPECT_EQ(Calls(t, "[jit]+0x40"), 5u);
  EXPECT_EQ(Calls(t, "[jit]+0x80"), 3u);
  EXPECT_EQ(Calls(t, "[jit]+0x100"), 4u);
}

TEST_P(JitRecordTest, WithoutTheCaptureJitCodeDoesNotDecode) {
  const Recording& rec = Record(GetParam(), {"--no-jitdump", "--no-perf-map"});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  TempDir tmp;
  const std::string copy = CopyOf(rec, tmp);
  ASSERT_EQ(unlink(ImagePath(copy, "jit-capture-", rec.pid, ".dump").c_str()), 0);
  EXPECT_GT(Decode(copy).errors, 0u);
}

TEST_P(JitRecordTest, PerfMapNamesCapturedCode) {
  const Recording& rec = Record(GetParam(), {"--no-jitdump"});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  const DecodedTrace t = Decode(rec.dir);
  EXPECT_EQ(t.errors, 0u) << (t.error_details.empty() ? "" : t.error_details[0]);
  EXPECT_EQ(Calls(t, "jit_square_plus_one"), 5u);
  EXPECT_EQ(Calls(t, "jit_triple"), 7u);
  // A perf map has no times: the two functions written at one address share a name.
  EXPECT_EQ(Calls(t, "jit_square") + Calls(t, "jit_negate"), 22u);
}

INSTANTIATE_TEST_SUITE_P(Backends, JitRecordTest, ::testing::Values("ptrace", "valgrind"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The Valgrind backend holds the jitdump open from when the runtime maps it: deleted at
// exit, it is still copied into the trace.
TEST(JitValgrindTest, JitdumpDeletedByTheRuntimeIsStillCopied) {
  std::string why;
  if (!ValgrindAvailable(&why)) GTEST_SKIP() << why;
  // The pin races the runtime's unlink; the sanitized converter reads the mapping too late.
  if (std::getenv("PTD_UNDER_SANITIZER") != nullptr) GTEST_SKIP() << "racy under ASan/UBSan (the converter lags the program)";
  const Recording& rec = Record("valgrind", {"--unlink-jitdump"});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  EXPECT_FALSE(PathExists(absl::StrCat("/tmp/jit-", rec.pid, ".dump")));
  absl::StatusOr<std::vector<uint8_t>> copy = ReadFileBytes(ImagePath(rec.dir, "jit-", rec.pid, ".dump"));
  ASSERT_TRUE(copy.ok()) << copy.status();
  absl::StatusOr<image::JitDump> dump = image::ParseJitDump(*copy, "copy");
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_TRUE(dump->closed);
  EXPECT_EQ(dump->code.size(), 5u);  // four loads and a move
  ExpectExactJitCalls(Decode(rec.dir));
}

// On the ptrace emulator's wall axis the clock is CLOCK_MONOTONIC, as the jitdump's
// stamps: without the capture, the jitdump alone places the rewritten code at its time.
// (The virtual axis cannot place the runtime's stamps; the capture places the code.)
class JitdumpTest : public ::testing::Test {
 protected:
  // A copy of the ptrace recording (wall axis) without the emulator's capture.
  std::string JitdumpOnlyCopy() {
    const Recording& rec = Record("ptrace", {}, /*wall_clock=*/true);
    EXPECT_TRUE(rec.error.empty()) << rec.error;
    pid_ = rec.pid;
    const std::string copy = CopyOf(rec, tmp_);
    EXPECT_EQ(unlink(ImagePath(copy, "jit-capture-", rec.pid, ".dump").c_str()), 0);
    return copy;
  }
  std::string Jitdump(const std::string& dir) const { return ImagePath(dir, "jit-", pid_, ".dump"); }

  TempDir tmp_;
  int pid_ = 0;
};

TEST_F(JitdumpTest, JitdumpAloneDecodesRewrittenAndMovedCodeAtTheirTimes) {
  ExpectExactJitCalls(Decode(JitdumpOnlyCopy()));
}

TEST_F(JitdumpTest, TruncatedJitdumpWarnsAndWhatPrecedesTheCutDecodes) {
  const std::string dir = JitdumpOnlyCopy();
  // Cuts the close record and the end of the move record (the last two).
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(Jitdump(dir));
  ASSERT_TRUE(bytes.ok());
  bytes->resize(bytes->size() - 20);
  ASSERT_TRUE(WriteFileAtomic(Jitdump(dir), absl::MakeConstSpan(*bytes)).ok());
  const DecodedTrace t = Decode(dir);
  EXPECT_TRUE(HasWarning(t, "cut short")) << (t.warnings.empty() ? "" : t.warnings[0]);
  EXPECT_TRUE(HasWarning(t, Jitdump(dir)));
  EXPECT_EQ(Calls(t, "jit_square"), 15u);
  EXPECT_EQ(Calls(t, "jit_square_plus_one"), 5u);
  EXPECT_EQ(Calls(t, "jit_negate"), 7u);
}

TEST_F(JitdumpTest, RecordOfImpossibleSizeEndsTheJitdumpWithAWarning) {
  const std::string dir = JitdumpOnlyCopy();
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(Jitdump(dir));
  ASSERT_TRUE(bytes.ok());
  (*bytes)[40 + 4] = 3;  // the first record's total_size
  (*bytes)[40 + 5] = (*bytes)[40 + 6] = (*bytes)[40 + 7] = 0;
  ASSERT_TRUE(WriteFileAtomic(Jitdump(dir), absl::MakeConstSpan(*bytes)).ok());
  const DecodedTrace t = Decode(dir);
  EXPECT_TRUE(HasWarning(t, "impossible size"));
  ExpectOwnCodeDecodesWithoutJitCode(t);
}

TEST_F(JitdumpTest, JitdumpOfAnotherArchitectureIsIgnoredWithAWarning) {
  const std::string dir = JitdumpOnlyCopy();
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(Jitdump(dir));
  ASSERT_TRUE(bytes.ok());
  (*bytes)[12] = 183;  // elf_mach: EM_AARCH64
  (*bytes)[13] = 0;
  ASSERT_TRUE(WriteFileAtomic(Jitdump(dir), absl::MakeConstSpan(*bytes)).ok());
  const DecodedTrace t = Decode(dir);
  EXPECT_TRUE(HasWarning(t, "another architecture"));
  ExpectOwnCodeDecodesWithoutJitCode(t);
}

TEST_F(JitdumpTest, PerfMapWithBadLinesWarnsAndKeepsTheGoodOnes) {
  const Recording& rec = Record("ptrace", {"--no-jitdump"});
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  const std::string dir = CopyOf(rec, tmp_);
  const std::string map = ImagePath(dir, "perf-", rec.pid, ".map");
  absl::StatusOr<std::string> text = ReadFileToString(map);
  ASSERT_TRUE(text.ok());
  ASSERT_TRUE(WriteFileAtomic(map, "not hex at all\n" + *text + "12 zz broken\n").ok());
  const DecodedTrace t = Decode(dir);
  EXPECT_TRUE(HasWarning(t, "not a perf map line"));
  EXPECT_EQ(t.errors, 0u);
  EXPECT_EQ(Calls(t, "jit_square_plus_one"), 5u);
  EXPECT_EQ(Calls(t, "jit_triple"), 7u);
}

}  // namespace
}  // namespace ptd
