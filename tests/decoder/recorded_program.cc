#include "tests/decoder/recorded_program.h"

#include "absl/strings/str_cat.h"

namespace ptd::decoder::testing {

Recording Record(const std::string& program, const std::vector<std::string>& options) {
  Recording r;
  r.dir = std::make_unique<ptd::testing::TempDir>();
  r.trace = r.dir->Sub("trace");
  std::string truth = r.dir->Sub("truth.bin");
  std::vector<std::string> argv = {PTD_CLI_PATH, "record", "--emulate=ptrace", "-q", "--ground-truth", truth,
                                   "-o", r.trace};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.push_back(absl::StrCat(PTD_BINARY_DIR, "/tests/programs/", program));
  ptd::testing::CommandResult result = ptd::testing::RunCommand(argv);
  if (result.exit_code != 0) {
    r.error = absl::StrCat("record failed: ", result.err);
    return r;
  }
  absl::StatusOr<std::vector<GroundTruthThread>> threads = LoadGroundTruth(truth);
  if (!threads.ok()) {
    r.error = std::string(threads.status().message());
    return r;
  }
  r.truth = *std::move(threads);
  return r;
}

SliceSink* SinksByThread::ForThread(int, int tid, const std::string&, const std::string&) {
  auto& sink = sinks[tid];
  if (!sink) sink = std::make_unique<RecordingSink>();
  return sink.get();
}

}  // namespace ptd::decoder::testing
