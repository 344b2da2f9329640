#pragma once
// Helpers shared by every test folder.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ptd::testing {

// A real, large x86-64 ELF every test machine has: the code walker walks it, image tests
// map it.
inline constexpr char kLibc[] = "/lib/x86_64-linux-gnu/libc.so.6";

struct CommandResult {
  int exit_code = -1;  // exit status, or 128+signal when killed
  std::string out;
  std::string err;
};

// Runs argv (argv[0] looked up in PATH unless it has a '/'), capturing stdout and stderr.
// stdin is /dev/null.
CommandResult RunCommand(const std::vector<std::string>& argv);

// The ptrace-direct binary of this build, and a run of it with `args`.
std::string CliPath();
CommandResult RunCli(const std::vector<std::string>& args);

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

// A trace directory written by `ptrace-direct record --emulate=ptrace -q` in a temp dir of
// its own; `error` says why there is none.
struct CliRecording {
  TempDir tmp;
  std::string trace;
  std::string error;
};
// Records `command` with `record_options` (e.g. {"--psb-period", "1024"}) before `-o`.
std::unique_ptr<CliRecording> RecordWithCli(const std::vector<std::string>& command,
                                            const std::vector<std::string>& record_options = {});

// A fixture whose tests share one `T` that is slow to make (a recording): the deriving
// `Suite`'s SetUpTestSuite sets shared_, which is destroyed after the suite's last test.
template <typename Suite, typename T>
class SuiteSharedTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { shared_.reset(); }
  static inline std::unique_ptr<T> shared_;
};

// Sends one line to a recorder's control FIFO (record --control) and returns its answer
// line from FIFO.ack, as a script would; waits up to 20 s for the recorder to create the
// FIFOs. A FIFO that cannot be opened is a test failure.
std::string ControlFifoCommand(const std::string& fifo, const std::string& line);

// The value of `"key": N` (a non-negative integer) in a JSON text such as a
// --stats-json file; -1 when absent.
int64_t JsonNumber(const std::string& json, const std::string& key);

// ../shared/samples next to the project root, or nullopt (tests then GTEST_SKIP).
std::optional<std::string> SharedSamplesDir();

// Source root of the project (for bundled test programs and data).
std::string SourceDir();

// A test program built by tests/programs (`Program`) or tests/programs_core (`CoreProgram`).
std::string Program(const std::string& name);
std::string CoreProgram(const std::string& name);

// The "SigBlk:" and "SigIgn:" masks (hex, as the kernel prints them) of a /proc/PID/status
// text; empty when a line is missing.
struct SignalMasks {
  std::string blocked;
  std::string ignored;
};
SignalMasks SignalMasksOf(const std::string& proc_status);
// Checks the /proc/self/status copy ptd_prog_signal_state wrote to `report`: nothing
// blocked, and blocked and ignored signals as in `parent` (read before the recording).
void ExpectSignalStateOf(const SignalMasks& parent, const std::string& report);

}  // namespace ptd::testing

// Skips the current test with a clear message when ../shared/samples is absent.
#define PTD_REQUIRE_SAMPLES(var)                                                   \
  auto var##_opt = ::ptd::testing::SharedSamplesDir();                             \
  if (!var##_opt) GTEST_SKIP() << "../shared/samples not present next to the project"; \
  const std::string var = *var##_opt
