#include "tests/testing/test_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"

extern char** environ;

namespace ptd::testing {

int64_t JsonNumber(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex(absl::StrCat("\"", key, "\": ([0-9]+)")))) return -1;
  int64_t value = -1;
  return absl::SimpleAtoi(m[1].str(), &value) ? value : -1;
}

CommandResult RunCommand(const std::vector<std::string>& argv) {
  CommandResult result;
  char out_tmpl[] = "/tmp/ptd-out-XXXXXX";
  char err_tmpl[] = "/tmp/ptd-err-XXXXXX";
  int out_fd = mkstemp(out_tmpl);
  int err_fd = mkstemp(err_tmpl);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc == 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } else {
    result.err = std::string("spawn failed: ") + std::strerror(rc);
  }
  close(out_fd);
  close(err_fd);
  if (auto s = ReadFileToString(out_tmpl); s.ok()) result.out = *s;
  if (auto s = ReadFileToString(err_tmpl); s.ok()) result.err += *s;
  unlink(out_tmpl);
  unlink(err_tmpl);
  return result;
}

std::string ControlFifoCommand(const std::string& fifo, const std::string& line) {
  const std::string ack = fifo + ".ack";
  for (int i = 0; i < 2000 && !PathExists(ack); ++i) usleep(10000);
  int w = open(fifo.c_str(), O_WRONLY);
  EXPECT_GE(w, 0) << fifo;
  std::string text = line + "\n";
  EXPECT_EQ(write(w, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(w);
  int r = open(ack.c_str(), O_RDONLY);
  EXPECT_GE(r, 0) << ack;
  std::string answer;
  char c;
  while (read(r, &c, 1) == 1 && c != '\n') answer.push_back(c);
  close(r);
  return answer;
}

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ptd-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() { (void)RemoveTree(path_); }

std::string CliPath() { return PTD_CLI_PATH; }

CommandResult RunCli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {CliPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

std::unique_ptr<CliRecording> RecordWithCli(const std::vector<std::string>& command,
                                            const std::vector<std::string>& record_options) {
  auto recording = std::make_unique<CliRecording>();
  recording->trace = recording->tmp.Sub("trace");
  std::vector<std::string> args = {"record", "--emulate=ptrace", "-q"};
  args.insert(args.end(), record_options.begin(), record_options.end());
  args.insert(args.end(), {"-o", recording->trace, "--"});
  args.insert(args.end(), command.begin(), command.end());
  CommandResult r = RunCli(args);
  if (r.exit_code != 0) recording->error = absl::StrCat("record failed: ", r.err);
  return recording;
}

std::string SourceDir() { return PTD_SOURCE_DIR; }

std::string Program(const std::string& name) {
  return std::string(PTD_BINARY_DIR) + "/tests/programs/" + name;
}
std::string CoreProgram(const std::string& name) {
  return std::string(PTD_BINARY_DIR) + "/tests/programs_core/" + name;
}

SignalMasks SignalMasksOf(const std::string& proc_status) {
  SignalMasks masks;
  for (absl::string_view line : absl::StrSplit(proc_status, '\n')) {
    if (absl::ConsumePrefix(&line, "SigBlk:")) masks.blocked = std::string(absl::StripAsciiWhitespace(line));
    if (absl::ConsumePrefix(&line, "SigIgn:")) masks.ignored = std::string(absl::StripAsciiWhitespace(line));
  }
  return masks;
}

void ExpectSignalStateOf(const SignalMasks& parent, const std::string& report) {
  absl::StatusOr<std::string> status = ReadFileToString(report);
  ASSERT_TRUE(status.ok()) << status.status();
  const SignalMasks child = SignalMasksOf(*status);
  EXPECT_EQ(child.blocked, "0000000000000000");
  EXPECT_EQ(child.blocked, parent.blocked);
  EXPECT_EQ(child.ignored, parent.ignored);
}

std::optional<std::string> SharedSamplesDir() {
  if (const char* env = getenv("PTD_SHARED_SAMPLES"); env && *env) {
    if (IsDirectory(env)) return std::string(env);
    return std::nullopt;
  }
  std::string p = std::filesystem::weakly_canonical(SourceDir() + "/../shared/samples").string();
  if (IsDirectory(p)) return p;
  return std::nullopt;
}

}  // namespace ptd::testing
