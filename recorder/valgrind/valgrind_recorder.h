#pragma once
// `ptrace-direct record --emulate=valgrind`: runs the program under Valgrind with
// ptrace-direct's tool (recorder/valgrind/tool), which reports the control flow it
// executes, and turns that into the PT packets and sideband a hardware recording holds
// (VgptConverter) while the program runs. Orders of magnitude faster than single-stepping
// (docs/emulation.md, docs/performance.md). The trace directory is in the hardware format
// (meta.json mode "emulated", emulator "valgrind").

#include <string>

#include "absl/status/statusor.h"
#include "recorder/session/emulated_record_summary.h"
#include "recorder/session/record_options.h"

namespace ptd {

// Honours: command (Valgrind cannot attach: --pid is refused), output_dir, force,
// snapshot / snapshot_size, timing, noretcomp, psb_period, wall_clock, follow_children,
// trigger_symbol / multi_snapshot, control_fifo, duration_s, quiet; SIGUSR2 takes a
// snapshot, SIGINT/SIGTERM stop.
absl::StatusOr<EmulatedRecordSummary> RecordValgrind(const RecordOptions& options);

// Whether Valgrind and our tool are installed; `why` says what is missing when not.
bool ValgrindAvailable(std::string* why);

}  // namespace ptd
