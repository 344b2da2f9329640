#pragma once
// Helpers shared by every test folder.

#include <optional>
#include <string>
#include <vector>

namespace ptd::testing {

struct CommandResult {
  int exit_code = -1;  // exit status, or 128+signal when killed
  std::string out;
  std::string err;
};

// Runs argv (argv[0] looked up in PATH unless it has a '/'), capturing stdout and stderr.
// stdin is /dev/null.
CommandResult RunCommand(const std::vector<std::string>& argv);

// A fresh empty directory under $TMPDIR, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// ../shared/samples next to the project root, or nullopt (tests then GTEST_SKIP).
std::optional<std::string> SharedSamplesDir();

// Source root of the project (for bundled test programs and data).
std::string SourceDir();

// A test program built by tests/programs (`Program`) or tests/programs_core (`CoreProgram`).
std::string Program(const std::string& name);
std::string CoreProgram(const std::string& name);

}  // namespace ptd::testing

// Skips the current test with a clear message when ../shared/samples is absent.
#define PTD_REQUIRE_SAMPLES(var)                                                   \
  auto var##_opt = ::ptd::testing::SharedSamplesDir();                             \
  if (!var##_opt) GTEST_SKIP() << "../shared/samples not present next to the project"; \
  const std::string var = *var##_opt
