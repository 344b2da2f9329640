#pragma once
// Snapshot and stop requests of an emulated recording, from the same sources as in
// hardware mode: SIGUSR2 (snapshot), SIGINT / SIGTERM (stop), the --control FIFO
// ("snapshot", "stop", each answered once the work is done) and --duration. The stepper
// spends its time blocked in waitpid(), and a target blocked in a syscall may not stop
// for a long time, so a helper thread watches the FIFO, the signals (through a self-pipe)
// and the clock, and interrupts the stepper's wait with a no-op signal, repeated every few
// milliseconds until the stepper has taken the request (a single signal landing just
// before waitpid() would be lost). Requests are served on the stepper's thread, between
// two steps, in the order they arrived. One instance at a time (signal handlers are
// process-wide; the previous ones are restored by the destructor).

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recorder/session/control_fifo.h"

namespace ptd {

struct EmulationRequest {
  enum class Kind { kSnapshot, kStop, kUnknownCommand };
  Kind kind = Kind::kSnapshot;
  std::string reason;      // chunk / end reason: "sigusr2", "control", "sigint", "duration", ...
  bool from_fifo = false;  // answer it in FIFO.ack
  std::string text;        // the FIFO line (unknown commands)
};

class EmulationControl {
 public:
  // Installs the signal handlers, opens `control_fifo` (empty: none) and starts the
  // watcher thread; the calling thread is the one whose waits get interrupted.
  static absl::StatusOr<std::unique_ptr<EmulationControl>> Start(const std::string& control_fifo,
                                                                 double duration_s);
  ~EmulationControl();
  EmulationControl(const EmulationControl&) = delete;
  EmulationControl& operator=(const EmulationControl&) = delete;

  // True while requests wait; cheap enough to read before every step.
  const std::atomic<bool>* pending() const { return &pending_; }
  // The waiting requests, oldest first.
  std::vector<EmulationRequest> Take();
  // Answers a FIFO request: "ack" for OK, "error: ..." otherwise. No-op for others.
  void Answer(const EmulationRequest& request, const absl::Status& status);

 private:
  EmulationControl() = default;
  void Watch();
  void Push(EmulationRequest request);

  std::unique_ptr<pt::ControlFifo> fifo_;
  double duration_s_ = 0;
  int stepper_tid_ = -1;
  int stop_pipe_[2] = {-1, -1};  // tells the watcher to end
  std::thread watcher_;
  std::mutex mu_;
  std::vector<EmulationRequest> queue_;
  std::atomic<bool> pending_{false};
  bool duration_sent_ = false;
};

}  // namespace ptd
