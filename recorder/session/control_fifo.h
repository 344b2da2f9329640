#pragma once
// --control FIFO: a script writes one command per line ("snapshot", "stop") into FIFO and
// reads one answer per command from FIFO.ack ("ack", or "error: ..." for an unknown
// command). Answers come after the work is done (the snapshot is on disk), so scripts
// need no sleeps. Both FIFOs are created when absent and held open read-write, so a
// writer closing its end is not an end-of-file and an answer waits in the pipe until
// the script reads it.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"

namespace ptd::pt {

enum class ControlCommand { kSnapshot, kStop, kUnknown };

struct ControlLine {
  ControlCommand command = ControlCommand::kUnknown;
  std::string text;  // the line as sent, trimmed
};

// Parses one line (surrounding whitespace ignored, case-sensitive).
ControlLine ParseControlLine(absl::string_view line);

class ControlFifo {
 public:
  static absl::StatusOr<ControlFifo> Open(const std::string& path);

  int fd() const { return command_fd_.get(); }
  const std::string& ack_path() const { return ack_path_; }
  // Complete lines read so far (a partial line waits for its newline). Empty lines skipped.
  std::vector<ControlLine> ReadLines();
  // Writes "<answer>\n" to the ack FIFO.
  absl::Status Answer(absl::string_view answer);

 private:
  ControlFifo(std::string ack_path, int command_fd, int ack_fd);

  std::string ack_path_;
  UniqueFd command_fd_;
  UniqueFd ack_fd_;
  std::string partial_;
};

}  // namespace ptd::pt
