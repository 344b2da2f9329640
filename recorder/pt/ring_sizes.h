#pragma once
// The sizes of a recording's AUX and DATA rings.

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "recorder/pt/perf_access.h"
#include "recorder/session/record_options.h"

namespace ptd::pt {

// InvalidArgument naming `option` unless `bytes` is a power-of-two number of pages (as
// the kernel maps rings).
absl::Status CheckRingBytes(uint64_t bytes, const char* option);

// `record` with the ring sizes perf would use when none was given and the kernel's
// locked-memory limit applies (no CAP_IPC_LOCK, perf_event_paranoid >= 0). Without the
// limit, default full-trace per-CPU rings shrink with the number of `cpus` (16 MiB each
// up to 16 CPUs, 256 MiB in all beyond, at least 4 MiB each).
RecordOptions WithRingSizes(const RecordOptions& record, const PerfAccess& access, size_t cpus);

// Per-thread mode with default sizes under the locked-memory limit: `record`'s rings
// shrunk (halving, powers of two pages, at least one page each) until rings for
// 2 x `threads` fit perf_event_mlock_kb x `cpus`, the budget the kernel shares among all
// of a user's rings. Otherwise `record` unchanged.
RecordOptions WithPerThreadRingSizes(const RecordOptions& record, const PerfAccess& access,
                                     size_t threads, size_t cpus);

}  // namespace ptd::pt
