// Debug files fetched from a real debuginfod server (Debian's `debuginfod -F DIR`, started
// and stopped here on 127.0.0.1): a stripped program whose debug file only that server
// has, recorded under Valgrind and decoded with DEBUGINFOD_URLS pointing at the server.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

// A TCP port nobody listens on now (the kernel's pick for a socket bound to port 0).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return ntohs(address.sin_port);
}

// `debuginfod -F dir` on a free port, its output in `log`; stopped (SIGTERM) by Stop or
// when the object dies.
class DebuginfodServer {
 public:
  DebuginfodServer(const std::string& dir, const std::string& database, const std::string& log) {
    port_ = FreePort();
    pid_ = fork();
    if (pid_ == 0) {
      const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      dup2(out, 2);
      const std::string port = std::to_string(port_);
      execlp("debuginfod", "debuginfod", "-F", dir.c_str(), "-p", port.c_str(), "-d", database.c_str(),
             static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~DebuginfodServer() { Stop(); }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  int port_ = -1;
  pid_t pid_ = -1;
};

// Sets an environment variable for the test's own decodes; restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_.has_value()) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::vector<std::string> DebuginfodWarnings(const DecodedTrace& decoded) {
  std::vector<std::string> found;
  for (const std::string& w : decoded.warnings) {
    if (absl::StrContains(w, "debuginfod")) found.push_back(w);
  }
  return found;
}

// Also: `record --debuginfod` stores the fetched debug file in the trace directory, which
// then decodes with its names where no server is reachable.
TEST(DebuginfodTest, NamesComeFromTheServersDebugFileAndAStoppedServerGivesOneWarning) {
  std::string why;
  if (!ValgrindAvailable(&why)) GTEST_SKIP() << why;
  if (RunCommand({"debuginfod", "--version"}).exit_code != 0) GTEST_SKIP() << "debuginfod (Debian package debuginfod) not installed";
  const std::string built = Program("ptd_prog_linked_bfd_pie");
  if (!PathExists(built)) GTEST_SKIP() << built << " not built";
  TempDir tmp;
  // The program stripped, with no debuglink; its debug file only in the server's directory.
  ASSERT_EQ(RunCommand({"mkdir", tmp.Sub("served")}).exit_code, 0);
  ASSERT_EQ(RunCommand({"objcopy", "--only-keep-debug", built, tmp.Sub("served/prog.debug")}).exit_code, 0);
  ASSERT_EQ(RunCommand({"objcopy", "--strip-all", built, tmp.Sub("prog")}).exit_code, 0);
  const std::string build_id = RunCommand({"sh", "-c", "readelf -n " + tmp.Sub("prog") +
                                                           " | sed -n 's/.*Build ID: //p'"}).out;
  ASSERT_FALSE(build_id.empty());

  DebuginfodServer server(tmp.Sub("served"), tmp.Sub("index.sqlite"), tmp.Sub("server.log"));
  // Ready once it has scanned the directory: debuginfod-find gets the file (each try with a
  // cache of its own, so that a miss before the scan is not remembered). Bounded wait.
  bool ready = false;
  for (int attempt = 0; attempt < 300 && !ready; ++attempt) {
    ready = RunCommand({"env", "DEBUGINFOD_URLS=" + server.url(),
                        "DEBUGINFOD_CACHE_PATH=" + tmp.Sub("poll-" + std::to_string(attempt)), "debuginfod-find",
                        "debuginfo", build_id.substr(0, build_id.find('\n'))})
                .exit_code == 0;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(ready) << "debuginfod did not serve the debug file within 30 s: "
                     << ReadFileToString(tmp.Sub("server.log")).value_or("");

  RecordOptions options = EmulatedRecordOptions({tmp.Sub("prog")}, tmp.path(), "valgrind");
  DecodedRecording rec = RecordForTest(RecordValgrind, options);
  ASSERT_FALSE(rec.dir.empty());
  // record --debuginfod: the debug file fetched into the trace directory, for decoding
  // where no server is reachable.
  DecodedRecording complete;
  {
    ScopedEnv urls("DEBUGINFOD_URLS", server.url());
    ScopedEnv cache("DEBUGINFOD_CACHE_PATH", tmp.Sub("cache-record"));
    options.output_dir = tmp.Sub("complete.dir");
    options.debuginfod = true;
    complete = RecordForTest(RecordValgrind, options);
    ASSERT_FALSE(complete.dir.empty());
  }

  {  // Off without DEBUGINFOD_URLS: only what the stripped file exports is named.
    unsetenv("DEBUGINFOD_URLS");
    absl::StatusOr<DecodedTrace> decoded = DecodeForTest(rec.dir);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->calls.count("fib"), 0u);
    EXPECT_TRUE(DebuginfodWarnings(*decoded).empty());
  }
  ScopedEnv urls("DEBUGINFOD_URLS", server.url());
  {
    ScopedEnv cache("DEBUGINFOD_CACHE_PATH", tmp.Sub("cache-up"));
    absl::StatusOr<DecodedTrace> decoded = DecodeForTest(rec.dir);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->errors, 0u);
    for (const char* fn : {"main", "run_linked_functions", "fib", "twice", "thrice", "tail_caller", "local_step"}) {
      EXPECT_GT(decoded->calls.count(fn), 0u) << fn;
    }
    EXPECT_TRUE(DebuginfodWarnings(*decoded).empty());
  }
  {  // The command line: one summary line; --no-debuginfod: not asked.
    ScopedEnv cache("DEBUGINFOD_CACHE_PATH", tmp.Sub("cache-cli"));
    CommandResult fetched = RunCli({"decode", "--summary", "--top", "100", rec.dir});
    EXPECT_EQ(fetched.exit_code, 0) << fetched.err;
    EXPECT_TRUE(absl::StrContains(fetched.err, "debuginfod: debug info of 1 file")) << fetched.err;
    EXPECT_TRUE(std::regex_search(fetched.out, std::regex(R"(\sfib\n)"))) << fetched.out;
    CommandResult off = RunCli({"decode", "--summary", "--top", "100", "--no-debuginfod", rec.dir});
    EXPECT_EQ(off.exit_code, 0) << off.err;
    EXPECT_FALSE(absl::StrContains(off.err, "debuginfod")) << off.err;
    EXPECT_FALSE(std::regex_search(off.out, std::regex(R"(\sfib\n)"))) << off.out;
  }
  server.Stop();
  {  // Down: one warning, the decode goes on with the file's own names.
    ScopedEnv cache("DEBUGINFOD_CACHE_PATH", tmp.Sub("cache-down"));
    absl::StatusOr<DecodedTrace> decoded = DecodeForTest(rec.dir);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->errors, 0u);
    EXPECT_EQ(decoded->calls.count("fib"), 0u);
    EXPECT_GT(decoded->calls.count("__libc_start_main"), 0u);
    EXPECT_EQ(DebuginfodWarnings(*decoded).size(), 1u);
  }
  {  // The trace recorded with --debuginfod has its debug file: named with no server.
    unsetenv("DEBUGINFOD_URLS");
    absl::StatusOr<DecodedTrace> decoded = DecodeForTest(complete.dir);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->errors, 0u);
    for (const char* fn : {"main", "fib", "local_step"}) EXPECT_GT(decoded->calls.count(fn), 0u) << fn;
  }
}

}  // namespace
}  // namespace ptd::testing
