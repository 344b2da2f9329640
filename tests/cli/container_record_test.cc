// `record --pid` of a process in its own mount and pid namespaces (a container): its
// binary is on a bind mount the host cannot see. The archive reads it through
// /proc/PID/map_files and /proc/PID/root, and the tracks show both pids.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "tests/testing/test_util.h"

extern char** environ;

namespace ptd {
namespace {

using ::testing::HasSubstr;
using testing::RunCommand;
using testing::TempDir;

// The first child of `pid` running an executable whose name ends with `name` (after its
// exec: the shell before it has the name in its command line too); 0 when none (yet).
int ChildRunning(int pid, const std::string& name) {
  std::string children =
      ReadFileToString(absl::StrCat("/proc/", pid, "/task/", pid, "/children")).value_or("");
  for (absl::string_view id : absl::StrSplit(children, ' ', absl::SkipEmpty())) {
    int child = 0;
    if (!absl::SimpleAtoi(id, &child)) continue;
    char exe[4096];
    ssize_t n = ::readlink(absl::StrCat("/proc/", child, "/exe").c_str(), exe, sizeof(exe));
    if (n > 0 && absl::EndsWith(absl::string_view(exe, static_cast<size_t>(n)), name)) return child;
  }
  return 0;
}

TEST(ContainerRecordTest, ProcessInOtherNamespacesDecodesWithSymbolsAndBothPids) {
  auto probe = RunCommand({"unshare", "--mount", "--pid", "--fork", "true"});
  if (probe.exit_code != 0) {
    GTEST_SKIP() << "unshare --mount --pid --fork is not permitted here: " << probe.err;
  }
  TempDir tmp;
  setenv("PTD_CACHE_DIR", tmp.Sub("cache").c_str(), 1);
  ASSERT_TRUE(MakeDirs(tmp.Sub("src")).ok());
  ASSERT_TRUE(MakeDirs(tmp.Sub("hidden")).ok());
  ASSERT_EQ(RunCommand({"cp", PTD_ATTACH_TARGET, tmp.Sub("src/contained")}).exit_code, 0);
  const std::string inside = tmp.Sub("hidden/contained");
  const std::string script =
      absl::StrCat("mount --bind ", tmp.Sub("src"), " ", tmp.Sub("hidden"), " && exec ", inside, " 2000");
  std::vector<std::string> args = {"unshare", "--mount", "--pid", "--fork", "sh", "-c", script};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t unshare = 0;
  ASSERT_EQ(posix_spawnp(&unshare, "unshare", nullptr, nullptr, argv.data(), environ), 0);
  int target = 0;
  for (int i = 0; i < 500 && target == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    target = ChildRunning(unshare, "/contained");
  }
  ASSERT_NE(target, 0) << "the contained program did not start";
  EXPECT_FALSE(PathExists(inside)) << "the host sees the container's bind mount";

  const std::string trace = tmp.Sub("trace");
  auto record = RunCommand({PTD_CLI_PATH, "record", "--emulate=ptrace", "-q", "--duration", "2", "--pid",
                            std::to_string(target), "-o", trace});
  ::kill(unshare, SIGKILL);
  ::kill(target, SIGKILL);
  ::waitpid(unshare, nullptr, 0);
  ASSERT_EQ(record.exit_code, 0) << record.err;

  const std::string ftf = tmp.Sub("out.ftf");
  const std::string stats = tmp.Sub("stats.json");
  auto decode = RunCommand({PTD_CLI_PATH, "decode", trace, "-o", ftf, "--stats-json", stats, "-q"});
  ASSERT_EQ(decode.exit_code, 0) << decode.err;
  EXPECT_THAT(decode.err, ::testing::Not(HasSubstr("not on this machine")));
  const std::string json = ReadFileToString(stats).value_or("");
  EXPECT_THAT(json, HasSubstr("\"errors\": 0"));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("\"instructions\": 0,")));
  const std::string dump = RunCommand({PTD_CLI_PATH, "ftf-dump", ftf}).out;
  EXPECT_THAT(dump, HasSubstr("\"step\""));  // the program's own function, by name
  EXPECT_THAT(dump, HasSubstr(absl::StrCat("koid=", target, " name=\"contained (pid 1 in its namespace)\"")));
  unsetenv("PTD_CACHE_DIR");
}

}  // namespace
}  // namespace ptd
