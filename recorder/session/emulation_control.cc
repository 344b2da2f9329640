#include "recorder/session/emulation_control.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ptd {
namespace {

// Process-wide state the async signal handlers may touch.
std::atomic<int> g_signal_bits{0};
int g_signal_pipe_write = -1;

constexpr int kBitUsr2 = 1;
constexpr int kBitInt = 2;
constexpr int kBitTerm = 4;

void OnSignal(int signo) {
  const int saved_errno = errno;
  g_signal_bits.fetch_or(signo == SIGUSR2 ? kBitUsr2 : signo == SIGINT ? kBitInt : kBitTerm);
  if (g_signal_pipe_write >= 0) {
    const char byte = 's';
    (void)!write(g_signal_pipe_write, &byte, 1);
  }
  errno = saved_errno;
}

// Delivered to the stepper thread only to make waitpid() return EINTR.
void OnWake(int) {}

int WakeSignal() { return SIGRTMIN + 4; }

struct SavedHandlers {
  struct sigaction usr2, intr, term, wake;
};
SavedHandlers g_saved;
int g_signal_pipe_read = -1;

}  // namespace

absl::StatusOr<std::unique_ptr<EmulationControl>> EmulationControl::Start(
    const std::string& control_fifo, double duration_s) {
  std::unique_ptr<EmulationControl> control(new EmulationControl());
  control->duration_s_ = duration_s;
  control->stepper_tid_ = static_cast<int>(syscall(SYS_gettid));
  if (!control_fifo.empty()) {
    absl::StatusOr<pt::ControlFifo> fifo = pt::ControlFifo::Open(control_fifo);
    if (!fifo.ok()) return fifo.status();
    control->fifo_ = std::make_unique<pt::ControlFifo>(*std::move(fifo));
  }
  int signal_pipe[2];
  if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoError("pipe2", "signal pipe", errno);
  if (pipe2(control->stop_pipe_, O_CLOEXEC) != 0) {
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    return ErrnoError("pipe2", "watcher stop pipe", errno);
  }
  g_signal_bits.store(0);
  g_signal_pipe_read = signal_pipe[0];
  g_signal_pipe_write = signal_pipe[1];

  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnSignal;  // no SA_RESTART: a blocked waitpid() returns EINTR
  sigaction(SIGUSR2, &action, &g_saved.usr2);
  sigaction(SIGINT, &action, &g_saved.intr);
  sigaction(SIGTERM, &action, &g_saved.term);
  action.sa_handler = OnWake;
  sigaction(WakeSignal(), &action, &g_saved.wake);
  control->watcher_ = std::thread([raw = control.get()] { raw->Watch(); });
  return control;
}

EmulationControl::~EmulationControl() {
  if (stop_pipe_[1] >= 0) {
    const char byte = 'q';
    (void)!write(stop_pipe_[1], &byte, 1);
  }
  if (watcher_.joinable()) watcher_.join();
  sigaction(SIGUSR2, &g_saved.usr2, nullptr);
  sigaction(SIGINT, &g_saved.intr, nullptr);
  sigaction(SIGTERM, &g_saved.term, nullptr);
  sigaction(WakeSignal(), &g_saved.wake, nullptr);
  const int write_end = g_signal_pipe_write;
  g_signal_pipe_write = -1;
  if (write_end >= 0) close(write_end);
  if (g_signal_pipe_read >= 0) close(g_signal_pipe_read);
  g_signal_pipe_read = -1;
  for (int fd : stop_pipe_) {
    if (fd >= 0) close(fd);
  }
}

void EmulationControl::Push(EmulationRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(request));
  pending_.store(true);
}

std::vector<EmulationRequest> EmulationControl::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<EmulationRequest> taken;
  taken.swap(queue_);
  pending_.store(false);
  return taken;
}

void EmulationControl::Answer(const EmulationRequest& request, const absl::Status& status) {
  if (!request.from_fifo || fifo_ == nullptr) return;
  (void)fifo_->Answer(status.ok() ? std::string("ack") : absl::StrCat("error: ", status.message()));
}

void EmulationControl::Watch() {
  // Only the stepper thread may be interrupted by the signals above.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  while (true) {
    int timeout_ms = -1;
    if (pending_.load()) {
      timeout_ms = 5;
    } else if (duration_s_ > 0 && !duration_sent_) {
      const double left = duration_s_ - std::chrono::duration<double>(Clock::now() - start).count();
      timeout_ms = left <= 0 ? 0 : static_cast<int>(left * 1000) + 1;
    }
    pollfd fds[3] = {{stop_pipe_[0], POLLIN, 0}, {g_signal_pipe_read, POLLIN, 0},
                     {fifo_ ? fifo_->fd() : -1, POLLIN, 0}};
    const int ready = poll(fds, 3, timeout_ms);
    if (ready < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) break;
    if (fds[1].revents != 0) {
      char buf[64];
      while (read(g_signal_pipe_read, buf, sizeof(buf)) > 0) {
      }
      const int bits = g_signal_bits.exchange(0);
      if (bits & kBitUsr2) Push({EmulationRequest::Kind::kSnapshot, "sigusr2", false, ""});
      if (bits & kBitInt) Push({EmulationRequest::Kind::kStop, "sigint", false, ""});
      if (bits & kBitTerm) Push({EmulationRequest::Kind::kStop, "sigterm", false, ""});
    }
    if (fds[2].revents != 0 && fifo_) {
      for (const pt::ControlLine& line : fifo_->ReadLines()) {
        if (line.command == pt::ControlCommand::kSnapshot) {
          Push({EmulationRequest::Kind::kSnapshot, "control", true, line.text});
        } else if (line.command == pt::ControlCommand::kStop) {
          Push({EmulationRequest::Kind::kStop, "control", true, line.text});
        } else {
          Push({EmulationRequest::Kind::kUnknownCommand, "", true, line.text});
        }
      }
    }
    if (duration_s_ > 0 && !duration_sent_ &&
        std::chrono::duration<double>(Clock::now() - start).count() >= duration_s_) {
      duration_sent_ = true;
      Push({EmulationRequest::Kind::kStop, "duration", false, ""});
    }
    if (pending_.load()) syscall(SYS_tgkill, getpid(), stepper_tid_, WakeSignal());
  }
}

}  // namespace ptd
