#pragma once
// An emulation backend's recording on a thread of the library (ptd::Recorder with the
// ptrace or Valgrind backend), driven through its control FIFO: the channel
// `record --control` serves, so snapshot and stop requests take the same path.

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recorder/session/emulated_record_summary.h"
#include "recorder/session/record_options.h"
#include "common/unique_fd.h"

namespace ptd {

// An emulation backend's entry point: records options.command or options.pids into
// options.output_dir and serves options.control_fifo (RecordEmulated, RecordValgrind).
using EmulatedRecordFunction = absl::StatusOr<EmulatedRecordSummary> (*)(const RecordOptions& options);

class EmulatedRun {
 public:
  // Creates options.control_fifo (and its ".ack" answer FIFO) and runs record(options)
  // on a thread. One process runs one at a time (both backends serve requests through
  // EmulationControl, whose signal handlers are process-wide).
  static absl::StatusOr<std::unique_ptr<EmulatedRun>> Start(EmulatedRecordFunction record,
                                                            RecordOptions options);
  // Stops a recording still running, then removes the FIFOs and options.output_dir.
  ~EmulatedRun();

  // Sends "snapshot" or "stop" and waits for the answer (or for the recording's end).
  absl::Status Request(const std::string& command);
  // Blocks until the backend returned; its outcome.
  const absl::StatusOr<EmulatedRecordSummary>& Join();
  bool Finished();

 private:
  EmulatedRun() = default;
  absl::Status Ended();

  std::string trace_dir_;
  std::string fifo_path_;
  UniqueFd command_fd_;
  UniqueFd ack_fd_;
  std::thread thread_;
  std::mutex request_mu_;  // one request at a time
  std::mutex mu_;
  bool finished_ = false;
  absl::StatusOr<EmulatedRecordSummary> result_ = absl::UnknownError("still recording");
};

}  // namespace ptd
