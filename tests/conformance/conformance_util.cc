#include "tests/conformance/conformance_util.h"

#include "recorder/valgrind/valgrind_recorder.h"

namespace ptd::testing {

const char* BackendOption(Backend backend) {
  return backend == Backend::kValgrind ? "--emulate=valgrind" : "--emulate=ptrace";
}

std::string WhyBackendUnavailable(Backend backend) {
  std::string why;
  if (backend == Backend::kValgrind && !ValgrindAvailable(&why)) return why;
  return {};
}

CommandResult RecordProgram(Backend backend, const std::string& trace_dir, const std::vector<std::string>& argv) {
  std::vector<std::string> args = {"record", "-q", BackendOption(backend), "-o", trace_dir, "--"};
  args.insert(args.end(), argv.begin(), argv.end());
  return RunCli(args);
}

void ExpectSameAsNative(const CommandResult& native, const CommandResult& recorded, const std::string& what) {
  EXPECT_EQ(recorded.exit_code, native.exit_code) << what << ": stderr " << recorded.err;
  EXPECT_EQ(recorded.out, native.out) << what;
  EXPECT_EQ(recorded.err, native.err) << what;
}

}  // namespace ptd::testing
