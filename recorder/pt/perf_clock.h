#pragma once
// The perf clock from user space: the clock the kernel stamps perf records with, for
// records and chunk times the recorder makes itself.

#include <linux/perf_event.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace ptd::pt {

// perf clock - CLOCK_MONOTONIC, measured with a software event on this thread: the time
// of the COMM record a PR_SET_NAME makes the kernel write, minus the midpoint of two
// CLOCK_MONOTONIC reads around it.
absl::StatusOr<int64_t> MeasurePerfClockOffset();

// CLOCK_MONOTONIC now. Not the perf clock: the kernel stamps records with local_clock()
// (event->clock, kernel/events/core.c), which is sched_clock-based and drifts from it.
uint64_t PerfClockNs();

// Whether `header` offers the TSC-to-perf-clock conversion (cap_user_time_zero, a
// non-zero time_mult).
bool HasTscConversion(const perf_event_mmap_page* header);

// The perf clock of the event behind `header` now: the TSC converted with the page's
// time_zero / time_mult / time_shift when it offers that (HasTscConversion), else
// PerfClockNs() plus `offset_without_tsc` (MeasurePerfClockOffset()'s). Stamps records
// synthesized from /proc and chunk times.
uint64_t EventClockNow(const perf_event_mmap_page* header, int64_t offset_without_tsc);

}  // namespace ptd::pt
