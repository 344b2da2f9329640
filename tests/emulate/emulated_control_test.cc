// record --emulate with the snapshot sources of hardware mode (--trigger, --multi-snapshot,
// --control FIFO, SIGUSR2), --pid attach to a running program, and --start-at a function
// of a shared library. Every chunk is retraced by libipt's block decoder directly
// (tests/emulate/libipt_retrace.cc); expected addresses come from the ground truth (the
// registers the stepper saw) and from nm, not from the emulator's PT.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "recorder/emulate/emulated_recorder.h"
#include "recorder/emulate/ground_truth.h"
#include "tests/emulate/libipt_retrace.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

// st_value of a function, from nm (an independent reader of the symbol table).
uint64_t NmAddress(const std::string& file, const std::string& symbol, bool dynamic) {
  std::vector<std::string> argv = {"nm"};
  if (dynamic) argv.push_back("-D");
  argv.push_back(file);
  CommandResult nm = RunCommand(argv);
  std::istringstream lines(nm.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string value, type, name;
    // nm -D prints versioned names: printf@@GLIBC_2.2.5.
    if (fields >> value >> type >> name && name.substr(0, name.find('@')) == symbol &&
        (type == "T" || type == "t")) {
      return std::stoull(value, nullptr, 16);
    }
  }
  ADD_FAILURE() << symbol << " not found by nm in " << file;
  return 0;
}

struct Recording {
  std::string dir;
  TraceMeta meta;
  std::vector<GroundTruthThread> threads;
  EmulatedRecordSummary summary;
  bool ok = false;
};

RecordOptions BaseOptions(const TempDir& tmp, const std::string& name) {
  RecordOptions options;
  options.emulate = true;
  options.quiet = true;
  options.output_dir = tmp.Sub(name + ".dir");
  options.ground_truth_path = tmp.Sub(name + ".truth");
  return options;
}

Recording Finish(const RecordOptions& options, absl::StatusOr<EmulatedRecordSummary> summary) {
  Recording rec;
  EXPECT_TRUE(summary.ok()) << summary.status();
  if (!summary.ok()) return rec;
  rec.summary = *summary;
  rec.dir = options.output_dir;
  rec.meta = LoadMeta(rec.dir);
  absl::StatusOr<std::vector<GroundTruthThread>> threads = LoadGroundTruth(options.ground_truth_path);
  EXPECT_TRUE(threads.ok()) << threads.status();
  if (threads.ok()) rec.threads = *threads;
  rec.ok = !rec.meta.streams.empty() && !rec.threads.empty();
  return rec;
}

// Chunks of one stream: consecutive in the file, and no AUX byte in two of them.
void ExpectDisjointChunks(const PtStream& stream) {
  for (size_t i = 1; i < stream.chunks.size(); ++i) {
    const PtChunk& prev = stream.chunks[i - 1];
    const PtChunk& cur = stream.chunks[i];
    EXPECT_EQ(cur.file_offset, prev.file_offset + prev.size) << "chunk " << i;
    EXPECT_GE(cur.aux_offset, prev.aux_offset + prev.size) << "chunk " << i << " repeats bytes";
  }
}

// The address the truth's last call went to (where the thread was when it stopped).
uint64_t LastCallTarget(const GroundTruthThread& thread) {
  for (auto it = thread.events.rbegin(); it != thread.events.rend(); ++it) {
    if (it->type == GroundTruthTag::kCall) return it->to;
  }
  return 0;
}

class EmulatedTriggerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    trigger_value_ = NmAddress(PTD_TRIGGER_TARGET, "ptd_trigger_point", false);
    for (bool multi : {false, true}) {
      RecordOptions options = BaseOptions(*tmp_, multi ? "multi" : "single");
      options.command = {PTD_TRIGGER_TARGET, "3", "5"};
      options.start_at_symbol = "main";
      options.trigger_symbol = "ptd_trigger_point";
      options.multi_snapshot = multi;
      options.snapshot = true;
      options.snapshot_size = 16384;
      // TSC only: with MTC/CYC the trace grows with wall time, and a slow (loaded or
      // sanitized) run would overflow the ring and lose the start this test counts.
      options.timing = TimingPreset::kLow;
      options.psb_period = 256;
      (multi ? multi_ : single_) = new Recording(Finish(options, RecordEmulated(options)));
    }
  }
  static void TearDownTestSuite() {
    delete single_;
    delete multi_;
    delete tmp_;
  }
  static TempDir* tmp_;
  static Recording* single_;
  static Recording* multi_;
  static uint64_t trigger_value_;
};
TempDir* EmulatedTriggerTest::tmp_ = nullptr;
Recording* EmulatedTriggerTest::single_ = nullptr;
Recording* EmulatedTriggerTest::multi_ = nullptr;
uint64_t EmulatedTriggerTest::trigger_value_ = 0;

TEST_F(EmulatedTriggerTest, TriggerSnapshotDecodesAndEndsAtTheTriggerFunction) {
  ASSERT_TRUE(single_->ok);
  EXPECT_EQ(single_->summary.end_reason, "trigger");
  EXPECT_EQ(single_->meta.end_reason, "trigger");
  EXPECT_EQ(single_->summary.trigger_hits, 1u);
  ASSERT_EQ(single_->meta.streams.size(), 1u);
  const PtStream& stream = single_->meta.streams[0];
  ASSERT_EQ(stream.chunks.size(), 1u);
  EXPECT_EQ(stream.chunks[0].reason, "trigger");
  RetraceResult result = RetraceStream(single_->dir, single_->meta, stream, &stream.chunks[0]);
  EXPECT_EQ(result.errors, 0) << result.first_error;
  EXPECT_GT(result.instructions, 0u);
  // The trace stops where the thread was about to run ptd_trigger_point: the truth's
  // last call went there, and it is the nm address plus a page-aligned load bias.
  const uint64_t target = LastCallTarget(single_->threads[0]);
  EXPECT_EQ(result.last_disable_ip, target);
  EXPECT_EQ(target & 0xfff, trigger_value_ & 0xfff);
  // Nothing ran past it: the truth ends with the call.
  EXPECT_EQ(single_->threads[0].ips.size(), result.instructions);
}

TEST_F(EmulatedTriggerTest, MultiSnapshotGivesOneChunkPerHitWithoutDuplicateBytes) {
  ASSERT_TRUE(multi_->ok);
  EXPECT_EQ(multi_->summary.trigger_hits, 3u);
  EXPECT_EQ(multi_->summary.snapshots, 3u);
  EXPECT_EQ(multi_->summary.end_reason, "exit");
  ASSERT_EQ(multi_->meta.streams.size(), 1u);
  const PtStream& stream = multi_->meta.streams[0];
  ASSERT_EQ(stream.chunks.size(), 4u);  // three triggers, then the end of the program
  ExpectDisjointChunks(stream);
  const uint64_t target = LastCallTarget(multi_->threads[0]);
  uint64_t decoded = 0;
  for (size_t i = 0; i < stream.chunks.size(); ++i) {
    const PtChunk& chunk = stream.chunks[i];
    EXPECT_EQ(chunk.reason, i < 3 ? "trigger" : "exit") << i;
    EXPECT_TRUE(chunk.overwrite);
    RetraceResult result = RetraceStream(multi_->dir, multi_->meta, stream, &chunk);
    EXPECT_EQ(result.errors, 0) << "chunk " << i << ": " << result.first_error;
    EXPECT_GT(result.instructions, 0u) << i;
    decoded += result.instructions;
    if (i < 3) {
      EXPECT_EQ(result.last_disable_ip & 0xfff, trigger_value_ & 0xfff) << i;
      EXPECT_NE(result.last_disable_ip, 0u);
    }
  }
  EXPECT_NE(target, 0u);
  // The program is short: nothing was overwritten, so the chunks hold the whole run.
  for (const PtChunk& chunk : stream.chunks) EXPECT_FALSE(chunk.lost_before);
  EXPECT_EQ(decoded, multi_->threads[0].ips.size());
}

std::string ReadLine(int fd) {
  std::string line;
  char c = 0;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

// A child of this process running `program` (the recorder launched it from its thread).
int FindChild(const std::string& program) {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  int found = -1;
  while (dirent* task = readdir(tasks)) {
    std::ifstream children(std::string("/proc/self/task/") + task->d_name + "/children");
    int pid = 0;
    while (children >> pid) {
      std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
      std::string argv0;
      std::getline(cmdline, argv0, '\0');
      if (argv0 == program) found = pid;
    }
  }
  closedir(tasks);
  return found;
}

uint64_t VoluntarySwitches(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stoull(line.substr(24));
  }
  return 0;
}

// Every ptrace stop is a voluntary context switch of the target: waiting for a few
// thousand more means the stepper has traced new code since the last snapshot.
void WaitForSteps(int pid, uint64_t steps) {
  const uint64_t start = VoluntarySwitches(pid);
  for (int i = 0; i < 20000 && VoluntarySwitches(pid) < start + steps; ++i) usleep(1000);
  ASSERT_GE(VoluntarySwitches(pid), start + steps) << "the target is not being stepped";
}

TEST(EmulatedControlTest, FifoAndSigusr2SnapshotsThenStopAcknowledgedAfterCommit) {
  TempDir tmp;
  RecordOptions options = BaseOptions(tmp, "control");
  options.command = {PTD_ATTACH_TARGET, "100000"};  // runs until stopped
  // Traced from its first instruction: with --start-at, the target's stops before the
  // symbol is reached (syscall stops) would count as steps in WaitForSteps, and on a
  // slow (sanitized) run the snapshots could come before tracing began.
  options.snapshot = true;
  options.snapshot_size = 8192;
  options.psb_period = 256;
  options.control_fifo = tmp.Sub("ctl");
  absl::StatusOr<EmulatedRecordSummary> summary = absl::UnknownError("not run");
  std::thread recorder([&] { summary = RecordEmulated(options); });

  // The recorder creates both FIFOs; wait for them without a fixed sleep.
  for (int i = 0; i < 2000 && !PathExists(tmp.Sub("ctl.ack")); ++i) usleep(5000);
  ASSERT_TRUE(PathExists(tmp.Sub("ctl.ack")));
  const int commands = open(tmp.Sub("ctl").c_str(), O_WRONLY);
  const int answers = open(tmp.Sub("ctl.ack").c_str(), O_RDONLY);
  ASSERT_GE(commands, 0);
  ASSERT_GE(answers, 0);
  const int target = FindChild(PTD_ATTACH_TARGET);
  ASSERT_GT(target, 0);
  WaitForSteps(target, 2000);
  ASSERT_EQ(write(commands, "snapshot\n", 9), 9);
  EXPECT_EQ(ReadLine(answers), "ack");
  ASSERT_EQ(write(commands, "bogus\n", 6), 6);
  EXPECT_EQ(ReadLine(answers).rfind("error: unknown command", 0), 0u);
  WaitForSteps(target, 2000);
  // Delivered to this process before kill() returns; the stop below comes after it.
  kill(getpid(), SIGUSR2);
  WaitForSteps(target, 2000);
  ASSERT_EQ(write(commands, "stop\n", 5), 5);
  EXPECT_EQ(ReadLine(answers), "ack");
  // Answered only once the trace directory is committed.
  EXPECT_TRUE(PathExists(options.output_dir + "/meta.json"));
  recorder.join();
  close(commands);
  close(answers);

  Recording rec = Finish(options, summary);
  ASSERT_TRUE(rec.ok);
  ASSERT_FALSE(rec.meta.pids.empty());
  kill(rec.meta.pids[0], SIGKILL);  // detached, still running
  waitpid(rec.meta.pids[0], nullptr, 0);
  EXPECT_EQ(rec.meta.end_reason, "control");
  EXPECT_EQ(rec.summary.snapshots, 2u);
  ASSERT_EQ(rec.meta.streams.size(), 1u);
  const PtStream& stream = rec.meta.streams[0];
  ASSERT_EQ(stream.chunks.size(), 3u);
  EXPECT_EQ(stream.chunks[0].reason, "control");
  EXPECT_EQ(stream.chunks[1].reason, "sigusr2");
  EXPECT_EQ(stream.chunks[2].reason, "control");
  ExpectDisjointChunks(stream);
  for (const PtChunk& chunk : stream.chunks) {
    RetraceResult result = RetraceStream(rec.dir, rec.meta, stream, &chunk);
    EXPECT_EQ(result.errors, 0) << chunk.reason << ": " << result.first_error;
  }
}

TEST(EmulatedAttachTest, AttachMidRunRecordsAndDetachLeavesTheTargetRunning) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(out[1], STDOUT_FILENO);
    execl(PTD_ATTACH_TARGET, PTD_ATTACH_TARGET, "400", nullptr);
    _exit(127);
  }
  close(out[1]);
  EXPECT_EQ(ReadLine(out[0]), "ready");  // running its loop now
  TempDir tmp;
  RecordOptions options = BaseOptions(tmp, "attach");
  options.pids = {child};
  options.duration_s = 0.3;
  Recording rec = Finish(options, RecordEmulated(options));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(out[0]);
  // It went on after the detach and its own check of its arithmetic passed.
  EXPECT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(rec.ok);
  EXPECT_EQ(rec.summary.end_reason, "duration");
  EXPECT_EQ(rec.summary.exit_status, -1);
  ASSERT_EQ(rec.threads.size(), 1u);
  EXPECT_GT(rec.threads[0].ips.size(), 100u);
  ASSERT_EQ(rec.meta.streams.size(), 1u);
  RetraceResult result = RetraceStream(rec.dir, rec.meta, rec.meta.streams[0]);
  EXPECT_EQ(result.errors, 0) << result.first_error;
  EXPECT_EQ(result.instructions, rec.threads[0].ips.size());
}

// The path of a library this test process has mapped (the same file the target maps).
std::string MappedLibrary(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash != std::string::npos && line.find(name) != std::string::npos) return line.substr(slash);
  }
  return "";
}

TEST(EmulatedStartAtTest, StartsAtAFunctionOfLibcAndOfADlopenedPlugin) {
  struct Case {
    std::string program, symbol, library;
  };
  const std::string libc = MappedLibrary("libc.so.6");
  ASSERT_FALSE(libc.empty());
  for (const Case& c : {Case{Program("ptd_prog_calls"), "printf", libc},
                        Case{Program("ptd_prog_dlopen"), "plugin_run",
                             Program("libptd_prog_plugin.so")}}) {
    TempDir tmp;
    RecordOptions options = BaseOptions(tmp, "start");
    options.command = {c.program};
    options.start_at_symbol = c.symbol;
    Recording rec = Finish(options, RecordEmulated(options));
    ASSERT_TRUE(rec.ok) << c.symbol;
    EXPECT_EQ(rec.summary.exit_status, 0) << c.symbol;
    // Tracing began at the function's first instruction (nm value + page-aligned bias).
    ASSERT_FALSE(rec.threads[0].ips.empty());
    EXPECT_EQ(rec.threads[0].ips[0] & 0xfff, NmAddress(c.library, c.symbol, true) & 0xfff) << c.symbol;
    ASSERT_EQ(rec.meta.streams.size(), 1u);
    RetraceResult result = RetraceStream(rec.dir, rec.meta, rec.meta.streams[0]);
    EXPECT_EQ(result.errors, 0) << c.symbol << ": " << result.first_error;
    EXPECT_EQ(result.instructions, rec.threads[0].ips.size()) << c.symbol;
  }
}

}  // namespace
}  // namespace ptd::testing
