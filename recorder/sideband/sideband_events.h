#pragma once
// perf_event_attr settings for sideband: the records the decoder needs to know which code
// was mapped where (MMAP/MMAP2), which thread is which (COMM, FORK/EXIT), and which thread
// ran on which CPU (SWITCH). A PERF_COUNT_SW_DUMMY software event carries them
// (DummySidebandAttr), which produces the same records with no samples. In hardware mode
// it is redirected into the PT ring and the PT event gets only the common fields
// (AddEventCommonFields): the PT event is disabled at every snapshot, and the kernel
// writes no sideband for a disabled event, so it must not carry any.

#include <linux/perf_event.h>

#include <cstdint>

#include "sideband/perf_record.h"  // kSidebandSampleType: TID|TIME|CPU|IDENTIFIER

namespace ptd {

struct SidebandEventOptions {
  // Per-CPU mode (one event per (process, cpu), inherit=1: children and new threads are
  // followed). Per-thread mode (cpu = -1) cannot inherit: the kernel refuses to mmap an
  // inherited per-task event, so new threads need their own event.
  bool per_cpu = true;
  // Start disabled; enable with PerfEvent::Enable() or at the target's exec.
  bool enable_on_exec = false;
  // >= 0: use_clockid=1 with this clock (the emulator needs CLOCK_MONOTONIC so its
  // synthetic TSC and the sideband share one clock). -1: perf's default clock.
  int clockid = -1;
  // Wake poll() after this many bytes of records (0: the kernel default, half the ring;
  // wakeup_events would only count samples, which a sideband event has none of).
  uint32_t wakeup_watermark = 0;
  // PERF_RECORD_SWITCH(_CPU_WIDE) records (off only for the emulator: see
  // SidebandRecorderOptions::context_switches).
  bool context_switches = true;
};

// Sets what every recorded event shares (size, sample_type, sample_id_all, inherit,
// clock, enable_on_exec, disabled, wakeup watermark) on `attr`, leaving type/config and
// the PMU-specific fields alone.
void AddEventCommonFields(const SidebandEventOptions& options, perf_event_attr* attr);

// AddEventCommonFields plus the sideband bits (mmap, mmap2, comm, comm_exec, task,
// context_switch).
void AddSidebandFields(const SidebandEventOptions& options, perf_event_attr* attr);

// A complete attr for a PERF_TYPE_SOFTWARE / PERF_COUNT_SW_DUMMY event with sideband,
// user space only, initially disabled.
perf_event_attr DummySidebandAttr(const SidebandEventOptions& options);

}  // namespace ptd
