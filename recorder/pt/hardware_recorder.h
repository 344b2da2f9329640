#pragma once
// `ptrace-direct record` without --emulate: a whole Intel PT recording into a trace
// directory, driven by RecordSession (signals, --control, --trigger, --duration, target
// exit). The ring factory is a parameter so the very same flow runs against the fake
// kernel in tests.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "recorder/pt/pt_ring_factory.h"
#include "recorder/session/record_options.h"

namespace ptd::pt {

struct HardwareRecordEnv {
  std::string sysfs_root = "/sys";
  std::string proc_root = "/proc";
  PtRingFactory* ring_factory = nullptr;  // null: perf_event_open
  bool handle_signals = true;
};

struct HardwareRecordSummary {
  std::string trace_dir;
  std::string end_reason;
  uint64_t pt_bytes = 0;
  uint64_t snapshots = 0;
  uint64_t lost_chunks = 0;
  size_t rings = 0;
  int exit_status = -1;  // launched target: raw wait status; -1 when attached / running
};

// Errors before anything is opened (no PMU: FailedPrecondition with the exact
// "no intel_pt PMU ..." message; bad options: InvalidArgument) leave no files behind.
absl::StatusOr<HardwareRecordSummary> RecordHardware(const RecordOptions& options,
                                                     const HardwareRecordEnv& env = {});

}  // namespace ptd::pt
