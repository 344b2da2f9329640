#pragma once
// What an emulated recording did (either emulator): the CLI's summary line, the library,
// and tests read it.

#include <cstdint>
#include <string>

namespace ptd {

// What an emulated recording did, for the CLI's summary line and for tests.
struct EmulatedRecordSummary {
  std::string trace_dir;         // the committed trace directory
  uint64_t steps = 0;            // single steps (ptrace) or executed blocks (Valgrind)
  uint64_t instructions = 0;     // instructions retired while tracing was on (in the trace)
  uint64_t overflows = 0;        // injected (--emulate-overflow-every)
  uint64_t lost_instructions = 0;  // executed but lost to them
  uint64_t pt_bytes = 0;         // PT bytes generated (before snapshot trimming)
  uint64_t threads = 0;          // threads seen
  uint64_t undecodable = 0;      // instructions the classifier could not decode (traced as unknown)
  uint64_t signals_delivered = 0;
  uint64_t snapshots = 0;        // snapshots taken before the end (signals, FIFO, trigger)
  uint64_t trigger_hits = 0;
  double seconds = 0;            // wall time spent stepping
  int exit_status = -1;          // launched target: exit code, or 128+signal; -1 if attached
  std::string end_reason;        // as in meta.json
};

}  // namespace ptd
