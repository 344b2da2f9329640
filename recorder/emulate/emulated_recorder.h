#pragma once
// `ptrace-direct record --emulate`: records a real program without Intel PT hardware by
// single-stepping every thread with ptrace and turning the executed instructions into the
// PT packets the hardware would have written (PacketGenerator). The result is a trace
// directory in exactly the hardware format (meta.json mode "emulated"), so decoding is
// the same code path as for hardware traces. See docs/emulation-ptrace.md.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "recorder/session/emulated_record_summary.h"
#include "recorder/session/record_options.h"

namespace ptd {

// Honours: command / pid, output_dir, force, per_thread or virtual_cpus (per-CPU mode),
// snapshot / snapshot_size, timing, noretcomp, psb_period, emulate_overflow_every
// (per-thread mode), start_at_symbol (executable
// or library), trigger_symbol / multi_snapshot, control_fifo, duration_s, quiet;
// SIGUSR2 takes a snapshot, SIGINT/SIGTERM stop.
// Errors: InvalidArgument for bad options, FailedPrecondition when ptrace is not
// permitted, Internal for tracer failures (the message names the thread and address).
absl::StatusOr<EmulatedRecordSummary> RecordEmulated(const RecordOptions& options);

}  // namespace ptd
