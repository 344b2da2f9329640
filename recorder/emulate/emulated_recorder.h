#pragma once
// `ptrace-direct record --emulate`: records a real program without Intel PT hardware by
// single-stepping every thread with ptrace and turning the executed instructions into the
// PT packets the hardware would have written (PacketGenerator). The result is a trace
// directory in exactly the hardware format (meta.json mode "emulated"), so decoding is
// the same code path as for hardware traces. See docs/emulation.md.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "recorder/record_options.h"

namespace ptd {

// What an emulated recording did, for the CLI's summary line and for tests.
struct EmulatedRecordSummary {
  std::string trace_dir;         // the committed trace directory
  uint64_t steps = 0;            // single steps taken (all threads)
  uint64_t instructions = 0;     // instructions retired while tracing was on (in the trace)
  uint64_t overflows = 0;        // injected (--emulate-overflow-every)
  uint64_t lost_instructions = 0;  // executed but lost to them
  uint64_t pt_bytes = 0;         // PT bytes generated (before snapshot trimming)
  uint64_t threads = 0;          // threads seen
  uint64_t undecodable = 0;      // instructions capstone could not decode (traced as unknown)
  uint64_t signals_delivered = 0;
  uint64_t snapshots = 0;        // snapshots taken before the end (signals, FIFO, trigger)
  uint64_t trigger_hits = 0;
  double seconds = 0;            // wall time spent stepping
  int exit_status = -1;          // launched target: exit code, or 128+signal; -1 if attached
  std::string end_reason;        // as in meta.json
};

// Honours: command / pid, output_dir, force, per_thread or virtual_cpus (per-CPU mode),
// snapshot / snapshot_size, timing, noretcomp, psb_period, emulate_overflow_every
// (per-thread mode), start_at_symbol (executable
// or library), trigger_symbol / multi_snapshot, control_fifo, duration_s, quiet;
// SIGUSR2 takes a snapshot, SIGINT/SIGTERM stop.
// Errors: InvalidArgument for bad options, FailedPrecondition when ptrace is not
// permitted, Internal for tracer failures (the message names the thread and address).
absl::StatusOr<EmulatedRecordSummary> RecordEmulated(const RecordOptions& options);

}  // namespace ptd
