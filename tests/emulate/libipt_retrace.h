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
  uint64_t last_disable_ip = 0;     // IP of the last asynchronous disable (FUP + TIP.PGD)
  // Timing (meta.json's cpuid 0x15 / mtc_freq / nom_freq given to libipt): per block,
  // its instruction count and pt_blk_time() after it; lost MTC/CYC packets summed.
  std::vector<uint64_t> block_ninsn;
  std::vector<uint64_t> block_times;
  uint64_t lost_mtc = 0;
  uint64_t lost_cyc = 0;
  // Per-CPU streams: instructions per thread, attributing each block to the thread the
  // synthesized schedule says was switched in at the time of the last enable.
  std::map<int, uint64_t> per_tid;
};

// Loads meta.json of `trace_dir` (asserting success inside).
TraceMeta LoadMeta(const std::string& trace_dir);

// Retraces one stream (per-CPU streams: blocks are attributed to threads via
// sideband/vcpu<cpu>.data), or only `chunk` of it.
RetraceResult RetraceStream(const std::string& trace_dir, const TraceMeta& meta,
                            const PtStream& stream, const PtChunk* chunk = nullptr);

}  // namespace ptd::testing
