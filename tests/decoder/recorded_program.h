#pragma once
// A test program recorded with `record --emulate --ground-truth`, and sinks that keep each
// thread's slices: what the ground-truth and image-timeline tests decode and compare.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "decoder/trace_decoder.h"
#include "recorder/emulate/ground_truth.h"
#include "tests/decoder/recording_sink.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder::testing {

struct Recording {
  std::unique_ptr<ptd::testing::TempDir> dir;
  std::string trace;
  std::vector<GroundTruthThread> truth;
  std::string error;  // why recording failed
};

// Records tests/programs/`program` with the extra `record` options.
Recording Record(const std::string& program, const std::vector<std::string>& options);

// One RecordingSink per thread id.
class SinksByThread : public ThreadSinkFactory {
 public:
  SliceSink* ForThread(int pid, int tid, const std::string& thread_name, const std::string& process_name) override;
  std::map<int, std::unique_ptr<RecordingSink>> sinks;
};

}  // namespace ptd::decoder::testing
