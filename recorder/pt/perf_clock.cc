// The perf clock (the kernel's local_clock, which stamps perf records) read from user
// space: through an event page's TSC conversion, or as CLOCK_MONOTONIC plus a measured offset.
#include "recorder/pt/perf_clock.h"

#include <sys/prctl.h>
#include <x86intrin.h>

#include <cerrno>
#include <optional>
#include <string>
#include <variant>

#include "common/file_util.h"
#include "common/host_info.h"
#include "common/monotonic_clock.h"
#include "recorder/sideband/data_ring.h"
#include "recorder/sideband/perf_event.h"
#include "recorder/sideband/perf_mmap.h"
#include "recorder/sideband/sideband_events.h"
#include "sideband/record_reader.h"

namespace ptd::pt {

uint64_t PerfClockNs() { return MonotonicNs(); }

absl::StatusOr<int64_t> MeasurePerfClockOffset() {
  // A dummy event on this thread that reports COMM; renaming the thread (to its own
  // name) makes the kernel write one, stamped with the perf clock, between two
  // CLOCK_MONOTONIC reads.
  SidebandEventOptions options;
  options.per_cpu = false;
  options.context_switches = false;
  perf_event_attr attr = DummySidebandAttr(options);
  attr.mmap = attr.mmap2 = attr.task = 0;
  absl::StatusOr<PerfEvent> event = PerfEvent::Open(attr, 0, -1);
  if (!event.ok()) return event.status();
  absl::StatusOr<PerfMmap> ring = PerfMmap::Map(*event, PageSize());
  if (!ring.ok()) return ring.status();
  char name[32] = {};
  if (prctl(PR_GET_NAME, name) != 0) return ErrnoError("prctl", "PR_GET_NAME", errno);
  if (absl::Status st = event->Enable(); !st.ok()) return st;
  const uint64_t before = PerfClockNs();
  const int renamed = prctl(PR_SET_NAME, name);
  const uint64_t after = PerfClockNs();
  (void)event->Disable();
  if (renamed != 0) return ErrnoError("prctl", "PR_SET_NAME", errno);
  std::string bytes;
  DataRingStats stats;
  DataRing data(ring->header(), ring->data(), ring->data_size());
  if (absl::Status st = data.Drain(&bytes, &stats); !st.ok()) return st;
  RecordFormat format;
  format.sample_type = attr.sample_type;
  format.sample_id_all = true;
  RecordReader reader(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()),
                                          bytes.size()),
                      "perf clock probe", format);
  while (true) {
    absl::StatusOr<std::optional<PerfRecord>> record = reader.Next();
    if (!record.ok()) return record.status();
    if (!record->has_value()) break;
    if (std::holds_alternative<CommRecord>((*record)->body) && (*record)->sample_id.has_time) {
      return static_cast<int64_t>((*record)->sample_id.time - (before + (after - before) / 2));
    }
  }
  return absl::NotFoundError("perf clock probe: the kernel wrote no COMM record");
}

namespace {

// The page's TSC conversion, read consistently: the kernel updates it under a sequence
// count (perf_event_mmap_page.lock), odd while it writes (perf_event_update_userpage);
// retry until the same even value is seen before and after, as perf_read_tsc_conversion
// does.
perf_event_mmap_page ReadTscConversion(const perf_event_mmap_page* header) {
  perf_event_mmap_page out{};
  uint32_t seq = 0;
  do {
    seq = __atomic_load_n(&header->lock, __ATOMIC_ACQUIRE);
    out.cap_user_time_zero = header->cap_user_time_zero;
    out.time_zero = header->time_zero;
    out.time_mult = header->time_mult;
    out.time_shift = header->time_shift;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
  } while ((seq & 1) != 0 || __atomic_load_n(&header->lock, __ATOMIC_RELAXED) != seq);
  return out;
}

}  // namespace

bool HasTscConversion(const perf_event_mmap_page* header) {
  const perf_event_mmap_page conversion = ReadTscConversion(header);
  return conversion.cap_user_time_zero && conversion.time_mult != 0;
}

uint64_t EventClockNow(const perf_event_mmap_page* header, int64_t offset_without_tsc) {
  const perf_event_mmap_page conversion = ReadTscConversion(header);
  const uint64_t zero = conversion.time_zero;
  const uint32_t mult = conversion.time_mult;
  const uint16_t shift = conversion.time_shift;
  if (!conversion.cap_user_time_zero || mult == 0) {
    // No TSC conversion offered (VMs without a stable TSC): CLOCK_MONOTONIC moved onto
    // the perf clock (local_clock) by the measured offset.
    return PerfClockNs() + static_cast<uint64_t>(offset_without_tsc);
  }
  const uint64_t tsc = __rdtsc();
  const uint64_t quot = tsc >> shift;
  const uint64_t rem = tsc & ((1ull << shift) - 1);
  return zero + quot * mult + ((rem * mult) >> shift);
}

}  // namespace ptd::pt
