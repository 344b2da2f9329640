#pragma once
// Self-tracing: traces the calling thread from construction to destruction and writes
// the trace directory then.
//
//   {
//     ptd::TraceScope scope("hot-loop.trace");
//     HotLoop();
//   }  // hot-loop.trace written here; scope.status() says whether it worked
//
// Intel PT hardware only: no emulation backend can trace the process it runs in. On
// machines without Intel PT, or with RecorderConfig::backend kPtrace / kValgrind, the
// scope records nothing and status() says why (FailedPrecondition).

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "ptd/recorder.h"

namespace ptd {

class TraceScope {
 public:
  // `config.command` / `config.pids` are ignored: the calling thread is traced.
  explicit TraceScope(std::string output_dir, RecorderConfig config = {});
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

  // Ends the scope early (what the destructor does) and returns the outcome.
  absl::Status Close();
  // Start() failure, or after Close() the outcome of writing the trace.
  const absl::Status& status() const { return status_; }

 private:
  std::string output_dir_;
  std::unique_ptr<Recorder> recorder_;
  absl::Status status_;
  bool closed_ = false;
};

}  // namespace ptd
