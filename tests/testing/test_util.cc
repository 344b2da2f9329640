#include "tests/testing/test_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "common/file_util.h"

extern char** environ;

namespace ptd::testing {

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

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ptd-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() { (void)RemoveTree(path_); }

std::string SourceDir() { return PTD_SOURCE_DIR; }

std::string Program(const std::string& name) {
  return std::string(PTD_BINARY_DIR) + "/tests/programs/" + name;
}
std::string CoreProgram(const std::string& name) {
  return std::string(PTD_BINARY_DIR) + "/tests/programs_core/" + name;
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
