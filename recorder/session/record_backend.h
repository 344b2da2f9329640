#pragma once
// Which backend records: the one recording-session choice every front end (the CLI, the
// library) makes the same way. Hardware PT when the machine has it and emulation was not
// asked for; otherwise the best emulator available: Valgrind (fast), else ptrace
// single-stepping. Attaching (--pid) is ptrace's alone: Valgrind cannot attach.

#include <string>

#include "absl/status/statusor.h"
#include "recorder/session/record_options.h"

namespace ptd {

enum class RecordBackend { kHardware, kValgrind, kPtrace };

const char* RecordBackendName(RecordBackend backend);

struct BackendChoice {
  RecordBackend backend = RecordBackend::kHardware;
  std::string why;  // one line for the user: what was picked and why
};

// InvalidArgument for an unknown emulator name; FailedPrecondition when the asked-for
// emulator is not installed (the message names the package and the alternative).
absl::StatusOr<BackendChoice> ChooseBackend(const RecordOptions& options);

}  // namespace ptd
