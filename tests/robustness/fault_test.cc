// Faults while recording (docs/robustness.md): the target killed, the target forking and
// exec'ing, the recorder stopped by SIGTERM, the disk filling up, and a long run with many
// snapshots. Each records a real program with `record --emulate` and checks that the
// trace directory is complete, that `info` says what happened and that it decodes.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/robustness/child_process.h"
#include "tests/robustness/robustness_util.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

using ::testing::HasSubstr;

const char kSpin[] = "ptd_core_spin_target";

int ReadPid(const std::string& pidfile) {
  int pid = -1;
  absl::StatusOr<std::string> text = ReadFileToString(pidfile);
  if (text.ok()) (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid);
  return pid;
}

// Waits until the recorder's staging directory holds some PT bytes of the target (the
// emulator has been stepping it for a while). Hang guard only.
bool WaitForTraceBytes(const std::string& staging_dir, long long at_least) {
  for (int i = 0; i < 6000; ++i) {
    for (const std::string& name : ListWithPrefix(staging_dir + "/aux", "tid")) {
      if (FileSizeOf(staging_dir + "/aux/" + name) >= at_least) return true;
    }
    usleep(10000);
  }
  return false;
}

ChildOptions FileSizeLimit(uint64_t bytes) {
  ChildOptions options;
  options.file_size_limit = bytes;
  return options;
}

// A recording of the looping program that is interrupted by `interrupt(recorder pid,
// target pid)` once the target is being traced.
struct Interrupted {
  ChildResult record;
  int target_pid = -1;
};

template <typename Fn>
Interrupted RecordSpinAndInterrupt(const TempDir& tmp, const std::string& dir, Fn interrupt) {
  Interrupted result;
  const std::string pidfile = tmp.Sub("target.pid");
  ChildProcess recorder({CliPath(), "record", "--emulate=ptrace", "-q", "-o", dir, "--",
                         CoreProgram(kSpin), pidfile});
  const std::string staging = absl::StrCat(dir, ".partial-", recorder.pid());
  EXPECT_TRUE(WaitForFile(pidfile)) << "the target never started";
  result.target_pid = ReadPid(pidfile);
  EXPECT_GT(result.target_pid, 0);
  // 4 KiB: the stream file has been flushed once, ~15 000 instructions into the loop.
  EXPECT_TRUE(WaitForTraceBytes(staging, 4096)) << "no PT bytes in " << staging;
  if (result.target_pid > 0) interrupt(recorder.pid(), result.target_pid);
  result.record = recorder.Wait();
  EXPECT_FALSE(result.record.hung);
  return result;
}

// The directory is committed under its name: no staging directory is left.
void ExpectCommitted(const TempDir& tmp, const std::string& dir) {
  EXPECT_TRUE(PathExists(dir + "/meta.json")) << dir;
  EXPECT_THAT(ListWithPrefix(tmp.path(), "trace.dir.partial"), ::testing::IsEmpty());
}

TEST(FaultTest, TargetKilledMidRecordingLeavesACompleteDecodableTrace) {
  TempDir tmp;
  const std::string dir = tmp.Sub("trace.dir");
  Interrupted run = RecordSpinAndInterrupt(tmp, dir, [](int, int target) { kill(target, SIGKILL); });
  EXPECT_EQ(run.record.exit_code, 128 + SIGKILL) << run.record.err;
  ExpectCommitted(tmp, dir);

  nlohmann::json info = InfoJson(dir);
  EXPECT_EQ(info["end_reason"], "target_killed");
  EXPECT_TRUE(HasNote(info["notes"], absl::StrCat("target process ", run.target_pid, " killed by SIGKILL")))
      << info["notes"].dump();
  CommandResult text = RunCli({"info", dir});
  EXPECT_THAT(text.out, HasSubstr("the target was killed by a signal"));

  DecodeOutcome decoded = Decode(dir, tmp.Sub("out.ftf"));
  ASSERT_TRUE(decoded.ok);
  EXPECT_GT(CallsOf(decoded.summary, "spin_step"), 0u) << "the loop ran before the kill";
}

TEST(FaultTest, RecorderStoppedBySigtermCommitsTheTrace) {
  TempDir tmp;
  const std::string dir = tmp.Sub("trace.dir");
  Interrupted run = RecordSpinAndInterrupt(tmp, dir, [](int recorder, int) { kill(recorder, SIGTERM); });
  EXPECT_EQ(run.record.exit_code, 0) << run.record.err;
  ExpectCommitted(tmp, dir);
  // A launched target does not outlive the recorder.
  EXPECT_FALSE(ProcessRunning(run.target_pid));

  nlohmann::json info = InfoJson(dir);
  EXPECT_EQ(info["end_reason"], "sigterm");
  CommandResult text = RunCli({"info", dir});
  EXPECT_THAT(text.out, HasSubstr("stopped by SIGTERM"));

  DecodeOutcome decoded = Decode(dir, tmp.Sub("out.ftf"));
  ASSERT_TRUE(decoded.ok);
  EXPECT_GT(CallsOf(decoded.summary, "spin_step"), 0u);
}

// The forked child is traced too (PTRACE_O_TRACEFORK) and its exec'd image is followed.
TEST(FaultTest, TargetThatForksAndExecsIsRecordedWithItsChild) {
  TempDir tmp;
  const std::string dir = tmp.Sub("trace.dir");
  ChildResult record = RunChild({CliPath(), "record", "--emulate=ptrace", "-q", "-o", dir, "--",
                                 CoreProgram("ptd_core_fork_exec_target")});
  ASSERT_EQ(record.exit_code, 0) << record.err;
  ExpectCommitted(tmp, dir);

  nlohmann::json info = InfoJson(dir);
  EXPECT_EQ(info["end_reason"], "exit");
  ASSERT_EQ(info["pids"].size(), 1u);
  const int parent = info["pids"][0].get<int>();
  EXPECT_TRUE(HasNote(info["notes"], absl::StrCat("target process ", parent, " exited with 0")))
      << info["notes"].dump();
  // Two processes: the parent and the child (a thread whose pid is its own, parent_tid the parent).
  int child = -1;
  for (const nlohmann::json& t : info["threads"]) {
    if (t["pid"] != parent && t["parent_tid"] == parent) child = t["pid"].get<int>();
  }
  ASSERT_GT(child, 0) << info["threads"].dump();
  // Both have their own PT stream.
  std::set<int> stream_tids;
  for (const nlohmann::json& s : info["streams"]) stream_tids.insert(s["tid"].get<int>());
  EXPECT_TRUE(stream_tids.count(parent)) << info["streams"].dump();
  EXPECT_TRUE(stream_tids.count(child)) << info["streams"].dump();

  DecodeOutcome decoded = Decode(dir, tmp.Sub("out.ftf"));
  ASSERT_TRUE(decoded.ok);
  EXPECT_EQ(CallsOf(decoded.summary, "parent_work"), 10u);
  EXPECT_EQ(CallsOf(decoded.summary, "child_work"), 10u) << "the exec'd child's own image";
  bool child_thread = false;
  for (const ThreadSummary& t : decoded.summary.threads) child_thread |= static_cast<int>(t.pid) == child;
  EXPECT_TRUE(child_thread);
}

// RLIMIT_FSIZE with SIGXFSZ ignored: writes past the limit fail with EFBIG, as on a full
// disk. The recorder names the file, fails, and keeps what was written, marked partial.
TEST(FaultTest, DiskFullKeepsWhatWasWrittenMarkedPartial) {
  TempDir tmp;
  const std::string dir = tmp.Sub("trace.dir");
  // Past the 8 KiB vDSO dump and meta.json; the PT of 2000 rounds (~40 000 instructions)
  // is larger on the wall axis (its timing packets: a single step takes microseconds).
  constexpr uint64_t kLimit = 8192;
  ChildResult record = RunChild({CliPath(), "record", "--emulate=ptrace", "--time=wall", "-q", "-o", dir, "--",
                                 CoreProgram(kSpin), tmp.Sub("target.pid"), "2000"},
                                FileSizeLimit(kLimit));
  EXPECT_EQ(record.exit_code, 125) << record.err;
  EXPECT_THAT(record.err, HasSubstr("aux/tid"));
  EXPECT_THAT(record.err, HasSubstr("File too large"));
  EXPECT_THAT(record.err, HasSubstr("marked partial"));
  ExpectCommitted(tmp, dir);

  // The sideband file may have hit the limit too (cut inside a record): info then names it
  // and exits 1 after printing everything.
  CommandResult info_run = RunCli({"info", "--json", dir});
  EXPECT_THAT(info_run.exit_code, ::testing::AnyOf(0, 1)) << info_run.err;
  if (info_run.exit_code == 1) {
    EXPECT_THAT(info_run.err, HasSubstr("sideband/"));
  }
  nlohmann::json info = nlohmann::json::parse(info_run.out, nullptr, false);
  ASSERT_FALSE(info.is_discarded()) << info_run.out;
  EXPECT_EQ(info["partial"], true);
  EXPECT_THAT(info["partial_reason"].get<std::string>(), HasSubstr("File too large"));
  EXPECT_EQ(info["end_reason"], "error");
  ASSERT_EQ(info["streams"].size(), 1u);
  const nlohmann::json& stream = info["streams"][0];
  EXPECT_EQ(stream["size"], kLimit) << "the file holds exactly the bytes up to the limit";
  ASSERT_EQ(stream["chunks"].size(), 1u);
  EXPECT_EQ(stream["chunks"][0]["size"], kLimit) << "the chunk describes only what is on disk";
  EXPECT_EQ(stream["chunks"][0]["truncated"], true);
  CommandResult text = RunCli({"info", dir});
  EXPECT_THAT(text.out, HasSubstr("PARTIAL"));

  DecodeOutcome decoded = Decode(dir, tmp.Sub("out.ftf"));
  ASSERT_TRUE(decoded.ok);
  ASSERT_TRUE(decoded.stats.is_object());
  EXPECT_GT(decoded.stats.value("instructions", 0), 100) << decoded.stats.dump();
  EXPECT_GT(CallsOf(decoded.summary, "spin_step"), 0u);

  // decode writing its FTF under a limit too small for it: a clear error, no crash.
  const std::string ftf = tmp.Sub("limited.ftf");
  ChildResult limited = RunChild({CliPath(), "decode", dir, "-o", ftf, "-q"}, FileSizeLimit(2048));
  EXPECT_EQ(limited.exit_code, 1) << limited.err;
  EXPECT_THAT(limited.err, HasSubstr("limited.ftf"));
  EXPECT_THAT(limited.err, HasSubstr("File too large"));
}

// Many snapshots of a long emulated run (SIGUSR2 every 50 ms for 8 s), then a decode of
// all of them. Peak RSS of recorder and decoder are reported (XML properties and the
// log). The bound is not about speed or a tight footprint: it catches memory that grows
// by more than ~1.5 MiB per snapshot.
TEST(FaultTest, LongRunWithManySnapshotsStaysBounded) {
  TempDir tmp;
  const std::string dir = tmp.Sub("trace.dir");
  const std::string pidfile = tmp.Sub("target.pid");
  constexpr int kRing = 1 << 20;
  ChildProcess recorder({CliPath(), "record", "--emulate=ptrace", "-q", "--snapshot", "--snapshot-size",
                         std::to_string(kRing), "-o", dir, "--", CoreProgram(kSpin), pidfile});
  ASSERT_TRUE(WaitForFile(pidfile));
  int sent = 0;
  for (; sent < 160; ++sent) {
    usleep(50000);
    kill(recorder.pid(), SIGUSR2);
  }
  kill(recorder.pid(), SIGINT);
  ChildResult record = recorder.Wait();
  ASSERT_EQ(record.exit_code, 0) << record.err;
  ExpectCommitted(tmp, dir);

  nlohmann::json info = InfoJson(dir);
  ASSERT_EQ(info["streams"].size(), 1u);
  const size_t chunks = info["streams"][0]["chunks"].size();
  uint64_t bytes = 0;
  for (const nlohmann::json& c : info["streams"][0]["chunks"]) bytes += c["size"].get<uint64_t>();

  const std::string ftf = tmp.Sub("out.ftf");
  ChildProcess decoder({CliPath(), "decode", dir, "-o", ftf, "-q"});
  ChildResult decode = decoder.Wait();
  ASSERT_EQ(decode.exit_code, 0) << decode.err;
  ASSERT_TRUE(CheckFtfFileOk(ftf));
  absl::StatusOr<FtfSummary> summary = SummarizeFtfFile(ftf);
  ASSERT_TRUE(summary.ok());
  EXPECT_GT(CallsOf(*summary, "spin_step"), 0u);

  RecordProperty("snapshots_requested", sent);
  RecordProperty("chunks", static_cast<int>(chunks));
  RecordProperty("pt_bytes", static_cast<int>(bytes));
  RecordProperty("recorder_peak_rss_kb", static_cast<int>(record.peak_rss_kb));
  RecordProperty("decoder_peak_rss_kb", static_cast<int>(decode.peak_rss_kb));
  std::printf("long run: %d SIGUSR2, %zu chunks, %llu PT bytes; peak RSS recorder %ld KiB, decoder %ld KiB\n",
              sent, chunks, static_cast<unsigned long long>(bytes), record.peak_rss_kb, decode.peak_rss_kb);
  EXPECT_GE(chunks, 20u) << "snapshots were taken";
  // Measured here: recorder ~40-70 MiB, decoder ~100-150 MiB, both growing with the
  // length of the run (the sideband holds two context switches per single step), not
  // with the number of snapshots. 256 MiB is far above that and below what keeping
  // 1.5 MiB per snapshot would reach. Under ASan, freed memory waits in a 256 MiB
  // quarantine and every allocation has redzones and shadow: allow four times as much.
  const long kBoundKb = (std::getenv("PTD_UNDER_SANITIZER") != nullptr ? 4 : 1) * 256 * 1024;
  EXPECT_LT(record.peak_rss_kb, kBoundKb);
  EXPECT_LT(decode.peak_rss_kb, kBoundKb);
}

}  // namespace
}  // namespace ptd::testing
