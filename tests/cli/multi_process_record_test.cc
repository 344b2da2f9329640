// `record --pid A,B` and `record --cgroup DIR` with the ptrace backend, on real running
// processes (tests/programs/prog_worker.c, copied under two names so their commands
// differ): the decoded FTF has each process as its own process track, named after its
// command, holding the calls of its own function and none of the other's.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "ftf/ftf_reader.h"
#include "recorder/target/target_process.h"
#include "tests/testing/test_util.h"

extern char** environ;

namespace ptd {
namespace {

using testing::RunCommand;
using testing::TempDir;

// A running prog_worker: started with its output on a pipe, returned once it said "ready".
struct Worker {
  pid_t pid = -1;
  int out_fd = -1;
};

Worker StartWorker(const std::string& exe, const std::string& which) {
  int out[2];
  if (pipe(out) != 0) return {};
  const pid_t child = fork();
  if (child == 0) {
    dup2(out[1], STDOUT_FILENO);
    execl(exe.c_str(), exe.c_str(), which.c_str(), nullptr);
    _exit(127);
  }
  close(out[1]);
  std::string line;
  char c = 0;
  while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
  if (line != "ready") ADD_FAILURE() << exe << " said \"" << line << "\" instead of ready";
  return {child, out[0]};
}

// SIGTERM, then its exit status (0: it ran on normally after the tracer left).
int StopWorker(Worker& worker) {
  if (worker.pid <= 0) return -1;
  kill(worker.pid, SIGTERM);
  int status = 0;
  waitpid(worker.pid, &status, 0);
  close(worker.out_fd);
  worker.pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool WaitUntilTraced(int pid) {
  for (int i = 0; i < 3000; ++i) {
    if (TracerPid(pid) != 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// What the FTF file says per process: its name (process kernel object) and how many
// slices each function has in it.
struct ProcessTracks {
  std::string name;
  std::map<std::string, int> slices;
};

std::map<uint64_t, ProcessTracks> ReadProcessTracks(const std::string& ftf_path) {
  std::map<uint64_t, ProcessTracks> out;
  absl::StatusOr<std::unique_ptr<ftf::FtfReader>> reader = ftf::FtfReader::Open(ftf_path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  ftf::FtfRecord record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    if (record.type == ftf::RecordType::kKernelObject && record.object.obj_type == ftf::kObjTypeProcess) {
      out[record.object.koid].name = record.object.name;
    } else if (record.type == ftf::RecordType::kEvent &&
               (record.event.type == ftf::EventType::kDurationBegin ||
                record.event.type == ftf::EventType::kDurationComplete)) {
      out[record.event.thread.pid].slices[record.event.name]++;
    }
  }
  return out;
}

std::string Describe(const std::map<uint64_t, ProcessTracks>& tracks) {
  std::string text;
  for (const auto& [pid, process] : tracks) {
    absl::StrAppend(&text, pid, " \"", process.name, "\": ", process.slices.size(), " functions; ");
  }
  return text;
}

// Records with the ptrace backend, decodes, and checks the two workers' tracks.
class MultiProcessRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("PTD_CACHE_DIR", tmp_.Sub("cache").c_str(), 1);
    // Two names, so two commands (the kernel's comm is the executable's name).
    for (const char* name : {"worker_one", "worker_two"}) {
      ASSERT_EQ(RunCommand({"cp", testing::Program("ptd_prog_worker"), tmp_.Sub(name)}).exit_code, 0);
    }
  }
  void TearDown() override {
    for (Worker* worker : {&one_, &two_, &late_}) StopWorker(*worker);
    unsetenv("PTD_CACHE_DIR");
  }

  // Decodes `trace` and checks that worker_one (worker_a) and worker_two (worker_b) are
  // each their own process, named after their command, with only their own function.
  void ExpectOwnTracks(const std::string& trace, const std::vector<std::pair<int, std::string>>& expected) {
    const std::string ftf = tmp_.Sub("out.ftf");
    auto decode = RunCommand({PTD_CLI_PATH, "decode", trace, "-o", ftf, "-q"});
    ASSERT_EQ(decode.exit_code, 0) << decode.err;
    const std::map<uint64_t, ProcessTracks> tracks = ReadProcessTracks(ftf);
    for (const auto& [pid, command] : expected) {
      SCOPED_TRACE(absl::StrCat(command, " (pid ", pid, "); tracks: ", Describe(tracks)));
      auto it = tracks.find(static_cast<uint64_t>(pid));
      ASSERT_NE(it, tracks.end());
      EXPECT_EQ(it->second.name, command);
      const bool is_a = command != "worker_two";
      const auto count = [&](const char* function) {
        auto f = it->second.slices.find(function);
        return f == it->second.slices.end() ? 0 : f->second;
      };
      EXPECT_GT(count(is_a ? "worker_a" : "worker_b"), 0);
      EXPECT_EQ(count(is_a ? "worker_b" : "worker_a"), 0);
    }
  }

  TempDir tmp_;
  Worker one_, two_, late_;
};

TEST_F(MultiProcessRecordTest, PidListRecordsEachProcessAsItsOwnNamedTrack) {
  one_ = StartWorker(tmp_.Sub("worker_one"), "a");
  two_ = StartWorker(tmp_.Sub("worker_two"), "b");
  ASSERT_GT(one_.pid, 0);
  ASSERT_GT(two_.pid, 0);
  const std::string trace = tmp_.Sub("trace");
  auto record = RunCommand({PTD_CLI_PATH, "record", "--emulate=ptrace", "-q", "--duration", "1", "--pid",
                            absl::StrCat(one_.pid, ",", two_.pid), "-o", trace});
  ASSERT_EQ(record.exit_code, 0) << record.err;
  const std::string meta = ReadFileToString(trace + "/meta.json").value_or("");
  EXPECT_TRUE(absl::StrContains(meta, absl::StrCat(one_.pid))) << meta;
  EXPECT_TRUE(absl::StrContains(meta, absl::StrCat(two_.pid))) << meta;
  ExpectOwnTracks(trace, {{one_.pid, "worker_one"}, {two_.pid, "worker_two"}});
  // Both were detached and ran on to their normal end.
  EXPECT_EQ(StopWorker(one_), 0);
  EXPECT_EQ(StopWorker(two_), 0);
}

TEST_F(MultiProcessRecordTest, PidListRefusesValgrindWithTheReason) {
  auto record = RunCommand({PTD_CLI_PATH, "record", "--emulate=valgrind", "-q", "--pid",
                            absl::StrCat(getpid(), ",", getppid()), "-o", tmp_.Sub("trace")});
  EXPECT_EQ(record.exit_code, 125) << record.err;
  EXPECT_TRUE(absl::StrContains(record.err, "cannot attach to a running process")) << record.err;
}

TEST_F(MultiProcessRecordTest, NoFollowLeavesForkedChildrenUntraced) {
  // ptd_prog_fork_exec forks a child that execs ptd_prog_calls, waits for it (exit 3 if
  // it failed), then calls parent_step 20 times.
  const std::string trace = tmp_.Sub("trace");
  auto record = RunCommand({PTD_CLI_PATH, "record", "--emulate=ptrace", "-q", "--no-follow", "-o", trace, "--",
                            testing::Program("ptd_prog_fork_exec")});
  ASSERT_EQ(record.exit_code, 0) << record.err;
  const std::string ftf = tmp_.Sub("out.ftf");
  auto decode = RunCommand({PTD_CLI_PATH, "decode", trace, "-o", ftf, "-q"});
  ASSERT_EQ(decode.exit_code, 0) << decode.err;
  std::map<uint64_t, ProcessTracks> tracks = ReadProcessTracks(ftf);
  std::erase_if(tracks, [](const auto& entry) { return entry.second.slices.empty(); });
  ASSERT_EQ(tracks.size(), 1u) << Describe(tracks);  // the parent only
  EXPECT_EQ(tracks.begin()->second.slices["parent_step"], 20) << Describe(tracks);
}

// A cgroup made for the test (v2 under /sys/fs/cgroup/unified, else the v1 pids
// hierarchy), removed again at the end; empty path when none can be made here.
class TestCgroup {
 public:
  TestCgroup() {
    for (const char* root : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids"}) {
      const std::string dir = absl::StrCat(root, "/ptd-test-", getpid());
      if (mkdir(dir.c_str(), 0755) == 0) {
        path_ = dir;
        return;
      }
      absl::StrAppend(&why_not_, root, ": ", strerror(errno), "; ");
    }
  }
  // Members left by a failed test are killed first: only an empty cgroup can be removed.
  ~TestCgroup() {
    if (path_.empty()) return;
    for (int i = 0; i < 100 && rmdir(path_.c_str()) != 0; ++i) {
      std::string procs = ReadFileToString(path_ + "/cgroup.procs").value_or("");
      for (absl::string_view line : absl::StrSplit(procs, '\n', absl::SkipEmpty())) {
        int pid = 0;
        if (absl::SimpleAtoi(line, &pid)) kill(pid, SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  const std::string& path() const { return path_; }
  const std::string& why_not() const { return why_not_; }
  bool Add(int pid) const {
    return WriteFileAtomic(path_ + "/cgroup.procs", absl::StrCat(pid, "\n")).ok() ||
           RunCommand({"sh", "-c", absl::StrCat("echo ", pid, " > ", path_, "/cgroup.procs")}).exit_code == 0;
  }

 private:
  std::string path_;
  std::string why_not_;
};

TEST_F(MultiProcessRecordTest, CgroupRecordsItsProcessesAndOneThatJoinsLater) {
  one_ = StartWorker(tmp_.Sub("worker_one"), "a");
  two_ = StartWorker(tmp_.Sub("worker_two"), "b");
  ASSERT_GT(one_.pid, 0);
  ASSERT_GT(two_.pid, 0);
  TestCgroup cgroup;
  if (cgroup.path().empty()) GTEST_SKIP() << "no cgroup can be created here: " << cgroup.why_not();
  ASSERT_TRUE(cgroup.Add(one_.pid) && cgroup.Add(two_.pid)) << cgroup.path();

  const std::string trace = tmp_.Sub("trace");
  std::vector<std::string> args = {PTD_CLI_PATH, "record", "--emulate=ptrace", "-q", "--cgroup",
                                   cgroup.path(), "-o", trace};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t recorder = 0;
  ASSERT_EQ(posix_spawn(&recorder, PTD_CLI_PATH, nullptr, nullptr, argv.data(), environ), 0);
  const bool traced = WaitUntilTraced(one_.pid) && WaitUntilTraced(two_.pid);
  // A third process joins while recording: the recorder polls cgroup.procs.
  late_ = StartWorker(tmp_.Sub("worker_one"), "a");
  const bool added = late_.pid > 0 && cgroup.Add(late_.pid);
  const bool late_traced = added && WaitUntilTraced(late_.pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // some calls of each
  kill(recorder, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(recorder, &status, 0), recorder);
  ASSERT_TRUE(traced);
  ASSERT_TRUE(added);
  EXPECT_TRUE(late_traced);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "record status " << status;
  ExpectOwnTracks(trace, {{one_.pid, "worker_one"}, {two_.pid, "worker_two"}, {late_.pid, "worker_one"}});
  const std::string meta = ReadFileToString(trace + "/meta.json").value_or("");
  EXPECT_TRUE(absl::StrContains(meta, absl::StrCat("process ", late_.pid, " joined"))) << meta;
  for (Worker* worker : {&one_, &two_, &late_}) EXPECT_EQ(StopWorker(*worker), 0);
}

}  // namespace
}  // namespace ptd
