#include "recorder/session/emulated_run.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ptd {
namespace {

std::atomic<bool> g_emulated_recording{false};

}  // namespace

absl::StatusOr<std::unique_ptr<EmulatedRun>> EmulatedRun::Start(EmulatedRecordFunction record,
                                                                RecordOptions options) {
  if (g_emulated_recording.exchange(true)) {
    return absl::FailedPreconditionError(
        "another ptd::Recorder of this process is recording with an emulation backend (one at a time)");
  }
  std::unique_ptr<EmulatedRun> run(new EmulatedRun());
  run->trace_dir_ = options.output_dir;
  run->fifo_path_ = options.control_fifo;
  // The FIFOs exist and are held open before the backend opens them, so a request sent
  // early waits in the pipe until the backend reads it.
  for (const std::string& path : {run->fifo_path_, run->fifo_path_ + ".ack"}) {
    if (mkfifo(path.c_str(), 0600) != 0) return ErrnoError("mkfifo", path, errno);
  }
  run->command_fd_.Reset(open(run->fifo_path_.c_str(), O_RDWR | O_CLOEXEC));
  if (!run->command_fd_.valid()) return ErrnoError("open", run->fifo_path_, errno);
  const std::string ack = run->fifo_path_ + ".ack";
  run->ack_fd_.Reset(open(ack.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK));
  if (!run->ack_fd_.valid()) return ErrnoError("open", ack, errno);
  run->thread_ = std::thread([raw = run.get(), record, options = std::move(options)] {
    absl::StatusOr<EmulatedRecordSummary> result = record(options);
    std::lock_guard<std::mutex> lock(raw->mu_);
    raw->result_ = std::move(result);
    raw->finished_ = true;
  });
  return run;
}

EmulatedRun::~EmulatedRun() {
  if (thread_.joinable()) {
    (void)Request("stop");
    thread_.join();
  }
  g_emulated_recording.store(false);
  unlink(fifo_path_.c_str());
  unlink((fifo_path_ + ".ack").c_str());
  (void)RemoveTree(trace_dir_);
}

absl::Status EmulatedRun::Request(const std::string& command) {
  std::lock_guard<std::mutex> request_lock(request_mu_);
  if (Finished()) return command == "stop" ? absl::OkStatus() : Ended();
  const std::string line = command + "\n";
  if (write(command_fd_.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    return ErrnoError("write", fifo_path_, errno);
  }
  std::string answer;
  while (true) {
    char buf[256];
    const ssize_t n = read(ack_fd_.get(), buf, sizeof(buf));
    if (n > 0) {
      answer.append(buf, static_cast<size_t>(n));
      if (size_t nl = answer.find('\n'); nl != std::string::npos) {
        answer.resize(nl);
        break;
      }
      continue;
    }
    if (Finished()) return command == "stop" ? absl::OkStatus() : Ended();
    pollfd fd = {ack_fd_.get(), POLLIN, 0};
    (void)poll(&fd, 1, 20);
  }
  if (answer == "ack") return absl::OkStatus();
  return absl::InternalError(absl::StrCat(command, ": ", answer));
}

const absl::StatusOr<EmulatedRecordSummary>& EmulatedRun::Join() {
  if (thread_.joinable()) thread_.join();
  return result_;
}

bool EmulatedRun::Finished() {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

absl::Status EmulatedRun::Ended() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!result_.ok()) return result_.status();
  return absl::FailedPreconditionError(
      absl::StrCat("the recording has ended (", result_->end_reason, ")"));
}

}  // namespace ptd
