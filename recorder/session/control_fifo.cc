#include "recorder/session/control_fifo.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ptd::pt {
namespace {

absl::StatusOr<int> OpenFifo(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoError("stat", path, errno);
    if (mkfifo(path.c_str(), 0600) != 0 && errno != EEXIST) {
      return ErrnoError("mkfifo", path, errno);
    }
  } else if (!S_ISFIFO(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("--control: ", path, " exists and is not a FIFO"));
  }
  int fd = open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  return fd;
}

}  // namespace

ControlLine ParseControlLine(absl::string_view line) {
  ControlLine out;
  out.text = std::string(absl::StripAsciiWhitespace(line));
  if (out.text == "snapshot") out.command = ControlCommand::kSnapshot;
  if (out.text == "stop") out.command = ControlCommand::kStop;
  return out;
}

absl::StatusOr<ControlFifo> ControlFifo::Open(const std::string& path) {
  absl::StatusOr<int> command_fd = OpenFifo(path);
  if (!command_fd.ok()) return command_fd.status();
  const std::string ack_path = path + ".ack";
  absl::StatusOr<int> ack_fd = OpenFifo(ack_path);
  if (!ack_fd.ok()) {
    close(*command_fd);
    return ack_fd.status();
  }
  return ControlFifo(ack_path, *command_fd, *ack_fd);
}

ControlFifo::ControlFifo(std::string ack_path, int command_fd, int ack_fd)
    : ack_path_(std::move(ack_path)), command_fd_(command_fd), ack_fd_(ack_fd) {}

std::vector<ControlLine> ControlFifo::ReadLines() {
  char buf[512];
  ssize_t n;
  while ((n = read(command_fd_.get(), buf, sizeof(buf))) > 0) partial_.append(buf, n);
  std::vector<ControlLine> lines;
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    ControlLine line = ParseControlLine(absl::string_view(partial_).substr(start, nl - start));
    if (!line.text.empty()) lines.push_back(std::move(line));
  }
  partial_.erase(0, start);
  return lines;
}

absl::Status ControlFifo::Answer(absl::string_view answer) {
  std::string line = absl::StrCat(answer, "\n");
  if (write(ack_fd_.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    return ErrnoError("write", ack_path_, errno);
  }
  return absl::OkStatus();
}

}  // namespace ptd::pt
