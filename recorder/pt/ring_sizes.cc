// The sizes of a recording's rings: checked as the kernel wants them, and chosen as perf
// chooses them when none was given.
#include "recorder/pt/ring_sizes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "recorder/sideband/perf_mmap.h"

namespace ptd::pt {

absl::Status CheckRingBytes(uint64_t bytes, const char* option) {
  const uint64_t page = PageSize();
  const uint64_t pages = bytes / page;
  if (bytes == 0 || bytes % page != 0 || (pages & (pages - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, " ", bytes, ": must be a power-of-two number of ", page, "-byte pages"));
  }
  return absl::OkStatus();
}

RecordOptions WithRingSizes(const RecordOptions& record, const PerfAccess& access, size_t cpus) {
  RecordOptions out = record;
  if (!record.default_ring_sizes) return out;
  if (access.mlock_unlimited()) {
    // One full-trace ring per CPU: 16 MiB each up to 16 CPUs, then 256 MiB shared out,
    // never below perf's 4 MiB for privileged users (intel_pt_recording_options).
    if (!record.per_thread && !record.snapshot) {
      uint64_t per_ring = 16ull << 20;
      while (per_ring > (4ull << 20) && per_ring * std::max<size_t>(cpus, 1) > (256ull << 20)) per_ring /= 2;
      out.buffer_size = per_ring;
    }
    return out;
  }
  // perf's sizes for users under the locked-memory limit (tools/perf/arch/x86/util/
  // intel-pt.c, intel_pt_recording_options): the kernel allows perf_event_mlock_kb
  // (516 KiB by default) per CPU beyond RLIMIT_MEMLOCK, and 16 MiB rings fail with EPERM.
  out.snapshot_size = 128 << 10;
  out.buffer_size = 128 << 10;
  out.data_size = 256 << 10;
  return out;
}

RecordOptions WithPerThreadRingSizes(const RecordOptions& record, const PerfAccess& access,
                                     size_t threads, size_t cpus) {
  RecordOptions out = record;
  if (!record.per_thread || !record.default_ring_sizes || access.mlock_unlimited()) return out;
  // perf_mmap charges every ring of the user against one budget of perf_event_mlock_kb
  // per online CPU; per-CPU mode opens one ring per CPU, per-thread mode one per thread.
  // Room for the threads there now and as many again created while recording.
  const uint64_t page = PageSize();
  const uint64_t budget = access.mlock_kb * 1024 * std::max<size_t>(cpus, 1);
  const uint64_t per_ring = budget / (2 * std::max<size_t>(threads, 1));
  uint64_t& aux = record.snapshot ? out.snapshot_size : out.buffer_size;
  while (page + aux + out.data_size > per_ring && (aux > page || out.data_size > page)) {
    // Halve the larger (the AUX area first on a tie): both stay powers of two pages.
    if (aux >= out.data_size && aux > page) {
      aux /= 2;
    } else {
      out.data_size /= 2;
    }
  }
  return out;
}

}  // namespace ptd::pt
