#pragma once
// An in-process stand-in for the kernel's side of one perf ring with an AUX area, laid
// out exactly like the real mapping: one header page (struct perf_event_mmap_page), the
// DATA ring, then the AUX area. The producer methods do what PT hardware and the kernel
// do; the ioctl methods do what PERF_EVENT_IOC_* do. Each behaviour follows a named
// kernel function (docs/verification.md, "Fake kernel sources"), so that the recorder's
// wrong assumptions fail here as they would on a real machine:
//  - snapshot (overwrite) mode: aux_head is the in-buffer write offset, published only
//    when the PT event stops (sched-out, DISABLE), with one PERF_RECORD_AUX sized to the
//    whole buffer each time (pt_event_stop, perf_aux_output_end);
//  - linear mode: aux_head and a PERF_RECORD_AUX are published only when the hardware
//    crosses the wakeup watermark (the PMI at the ToPA INT entry), on sched-out and on
//    DISABLE (pt_handle_status/pt_event_stop -> perf_aux_output_end), never per write;
//    each transaction puts STOP (and INT) at the end of the ToPA region before the one
//    holding the page that the free room ends in, and INT at the end of the region before
//    the one holding the wakeup page (pt_buffer_reset_markers): PMIs and stops come at
//    region boundaries. Reaching STOP sets TRUNCATED and disables the PT event until
//    PERF_EVENT_IOC_ENABLE (pt_handle_status, perf_aux_output_end:
//    perf_event_disable_inatomic); a transaction whose room ends inside the current region
//    is TRUNCATED at once, and one that begins with no room at all disables the event with
//    a wakeup and no PERF_RECORD_AUX (perf_aux_output_begin);
//  - sideband (MMAP/COMM/...) is written only for enabled events that asked for it
//    (perf_iterate_ctx skips events below PERF_EVENT_STATE_INACTIVE), and nothing is
//    counted as lost for a disabled event;
//  - while the ring is paused (PERF_EVENT_IOC_PAUSE_OUTPUT) every record is counted lost
//    and a PERF_RECORD_LOST precedes the next record written (__perf_output_begin);
//  - each event of the ring (the owner's and those AddEvent adds, as SET_OUTPUT redirects
//    them) starts disabled unless `enabled` (attr.disabled == 0); IOC_ENABLE/DISABLE act
//    on every event of the ring, a truncation disables only the event that was writing;
//  - linear mode wakes every event's fd (POLLIN) when the bytes published since the last
//    wakeup reach aux_watermark, and at a truncation (perf_aux_output_end,
//    rb_need_aux_wakeup, perf_output_wakeup);
//  - an event whose task exited polls POLLHUP for good (perf_poll, is_event_hup); the
//    ring's other events do not.

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/types/span.h"
#include "recorder/pt/pt_ring_source.h"

namespace ptd::pt::testing {

struct FakeKernelOptions {
  size_t data_size = 16 * 4096;  // powers of two, as the kernel requires
  size_t aux_size = 16 * 4096;
  bool overwrite = false;        // PROT_READ AUX mapping: snapshot mode
  // attr.aux_watermark; 0 takes rb_alloc_aux's default, half the AUX area (linear mode).
  uint32_t aux_watermark = 0;
  // Bytes of each ToPA output region (a power of two pages dividing aux_size); 0: what
  // 6.x rb_alloc_aux allocates in linear mode, chunks of get_order(watermark) pages up to
  // MAX_PAGE_ORDER (4 MiB), each one region (pt_buffer_init_topa).
  size_t region_size = 0;
  int cpu = 0;
  int tid = -1;
  uint32_t pid = 1234;           // sample_id of the records it writes
  // attr.disabled == 0: the owner's events run from the open. A launch's events are
  // opened disabled with enable_on_exec while the child waits just before its exec; the
  // fake cannot see the exec and takes it as done at the open (enabled = true).
  bool enabled = true;
  // Which events of the ring asked for sideband (attr.mmap/comm/task/context_switch):
  // the PT event itself, and/or a separate tracking (dummy) event redirected into it.
  bool sideband_on_pt = false;
  bool tracking_event = true;
};

// `n` pseudo-random trace bytes: odd bytes (so never a PSB) with runs of 1 to 16 PAD
// packets (0x00) every few hundred bytes, as real PT pads between and inside packet
// groups; a PAD looks exactly like the zeroes of the kernel's fresh pages.
std::vector<uint8_t> TraceBytes(size_t n, uint32_t seed);

class FakePtKernel {
 public:
  explicit FakePtKernel(FakeKernelOptions options);
  ~FakePtKernel();
  FakePtKernel(const FakePtKernel&) = delete;
  FakePtKernel& operator=(const FakePtKernel&) = delete;

  // --- Producer side (hardware and kernel) ---
  // Trace bytes as the hardware writes them. Returns how many were stored: none while
  // the PT event is disabled (the hardware is off); in linear mode what fits (up to a
  // page boundary) before aux_tail, the rest dropped, TRUNCATED reported and the event
  // disabled; all of them in overwrite mode. Nothing is published until SchedOut() or
  // DisablePt(), or in linear mode until the bytes since the last wakeup reach the
  // watermark (a PMI: a PERF_RECORD_AUX and aux_head published).
  size_t WriteTrace(absl::Span<const uint8_t> bytes);
  // The traced task is switched out (and back in): pt_event_stop(PERF_EF_UPDATE).
  void SchedOut();
  // A side-band record (MMAP2, COMM, FORK, SWITCH ...): written when an enabled event of
  // the ring asked for side-band; otherwise silently not generated. True when written.
  bool EmitSideband(absl::Span<const uint8_t> record);
  // Appends an encoded perf record to the DATA ring as perf_output_begin does: when it
  // does not fit or the ring is paused it is counted lost, and a PERF_RECORD_LOST
  // precedes the next record that is written.
  bool WriteRecord(absl::Span<const uint8_t> record);
  // The traced task exited: its event's fd polls POLLHUP from now on.
  void ExitTask();  // the owner's
  void ExitTask(int tid);
  // Another task's events redirected into this ring (PERF_EVENT_IOC_SET_OUTPUT), opened
  // enabled or not (attr.disabled). Its fd is one more in poll_fds().
  void AddEvent(int tid, bool enabled);
  // Which task runs (its PT event is the one WriteTrace writes through); the owner's
  // at first.
  void RunTask(int tid);

  // --- ioctls ---
  void DisablePt();       // PERF_EVENT_IOC_DISABLE on every PT event of the ring
  void EnablePt();        // PERF_EVENT_IOC_ENABLE on every PT event of the ring
  void EnableAll();       // IOC_ENABLE on every event, the tracking events too
  void SetTrackingEnabled(bool on);  // IOC_DISABLE/ENABLE on the tracking event
  void PauseOutput(bool pause);      // PERF_EVENT_IOC_PAUSE_OUTPUT

  // Run after the PT event was disabled / enabled through the ring (outside the fake's
  // lock): lets a test act "while the snapshot has PT stopped" or "right after".
  std::function<void()> on_pt_disabled;
  std::function<void()> on_pt_enabled;
  // Run when the recorder drops the ring (munmap and close of its events).
  std::function<void()> on_unmapped;
  bool unmapped() const;
  void Unmap();  // what dropping the ring's source does

  // A PtRingSource over this fake (the fake must outlive it).
  std::unique_ptr<PtRingSource> MakeSource();

  perf_event_mmap_page* header() const { return header_; }
  uint8_t* data() const { return base_ + kPage; }
  const uint8_t* aux() const { return base_ + kPage + options_.data_size; }
  const FakeKernelOptions& options() const { return options_; }
  int poll_fd() const;  // the owner's event's fd
  std::vector<int> poll_fds() const;  // every event's, the owner's first
  uint64_t wakeups() const;  // POLLIN wakeups given so far
  uint64_t bytes_dropped() const;
  uint64_t aux_written() const;  // monotonic count of stored trace bytes
  bool pt_enabled() const;  // the running task's PT event
  bool pt_enabled(int tid) const;
  int disable_calls() const;
  uint64_t sideband_not_generated() const;  // EmitSideband calls with no enabled event

  static constexpr size_t kPage = 4096;

 private:
  bool WriteRecordLocked(absl::Span<const uint8_t> record);
  void WriteAuxRecordLocked(uint64_t offset, uint64_t size, uint64_t flags);
  // pt_event_stop(PERF_EF_UPDATE) → perf_aux_output_end.
  void StopPtLocked();
  // Linear mode's perf_aux_output_end: what was stored since the last one, published.
  void EndLinearTransactionLocked(uint64_t flags);
  // Linear mode's perf_aux_output_begin + pt_buffer_reset_markers: sets stop_at_ and
  // intr_at_, or ends the attempt (no room, or room ending inside the current region)
  // with the event disabled and returns false.
  bool BeginLinearTransactionLocked();
  uint64_t Watermark() const;
  // perf_output_wakeup: every event's fd polls POLLIN. The kernel clears rb->poll when a
  // poller reads it; a pipe cannot, so the fake clears it at its next step once the
  // reader has taken everything published (ClearWakeupLocked).
  void WakeLocked();
  void ClearWakeupLocked();
  // A copy of a counter the producer may be changing (the getters above).
  template <typename T>
  T Locked(const T& field) const {
    std::lock_guard<std::mutex> lock(mu_);
    return field;
  }

  FakeKernelOptions options_;
  uint8_t* base_ = nullptr;
  perf_event_mmap_page* header_ = nullptr;
  mutable std::mutex mu_;  // the producer is one "CPU": its writes do not interleave
  uint64_t aux_head_ = 0;  // monotonic count of bytes stored
  uint64_t aux_published_ = 0;  // linear: the aux_head user space sees (rb->aux_head)
  uint64_t aux_wakeup_ = 0;     // linear: rb->aux_wakeup
  uint64_t data_head_ = 0;
  uint64_t dropped_ = 0;
  uint64_t lost_records_ = 0;
  uint64_t sideband_not_generated_ = 0;
  struct Event {
    int tid = -1;
    bool pt_enabled = false;
    int read_fd = -1;   // a pipe: a byte in it is POLLIN, closing the write end POLLHUP
    int write_fd = -1;
  };
  Event& Running() { return events_[running_]; }
  const Event& Running() const { return events_[running_]; }
  Event* Find(int tid);
  std::vector<Event> events_;  // events_[0]: the owner's
  size_t running_ = 0;
  // Linear: a write transaction is open (perf_aux_output_begin found room); closed by
  // every perf_aux_output_end (watermark, sched-out, disable, truncation).
  bool transaction_open_ = false;
  uint64_t region_size_ = 0;
  uint64_t stop_at_ = 0;  // stream byte where the hardware stops (the STOP region's end)
  uint64_t intr_at_ = 0;  // stream byte of the next PMI (an INT region's end)
  bool wake_pending_ = false;
  uint64_t wakeups_ = 0;
  bool tracking_enabled_ = true;
  bool paused_ = false;
  int disable_calls_ = 0;
  bool unmapped_ = false;
};

}  // namespace ptd::pt::testing
