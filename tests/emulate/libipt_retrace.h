#pragma once
// Test helper: retraces an emulated trace directory with libipt's block decoder
// directly (no code of the project's decoder), with a pt_image built from the kernel's
// MMAP2 sideband records and the dumped vDSO. Independent of the emulator's own logic
// except for the trace directory format.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/trace_meta.h"

namespace ptd::testing {

struct RetraceResult {
  uint64_t instructions = 0;
  int errors = 0;
  std::string first_error;
  uint64_t enables = 0;
  uint64_t async_disables = 0;
  uint64_t overflows = 0;
  std::vector<uint64_t> block_ips;  // first IP of every block (bounded)
  // Per-CPU streams: instructions per thread, attributing each block to the thread the
  // synthesized schedule says was switched in at the time of the last enable.
  std::map<int, uint64_t> per_tid;
};

// Loads meta.json of `trace_dir` (asserting success inside).
TraceMeta LoadMeta(const std::string& trace_dir);

// Retraces one stream. With `schedule_cpu` >= 0, blocks are attributed to threads via
// sideband/vcpu<cpu>.data.
RetraceResult RetraceStream(const std::string& trace_dir, const TraceMeta& meta,
                            const PtStream& stream);

}  // namespace ptd::testing
