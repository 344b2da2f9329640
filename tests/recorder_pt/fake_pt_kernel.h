#pragma once
// An in-process stand-in for the kernel's side of one perf ring with an AUX area, laid
// out exactly like the real mapping: one header page (struct perf_event_mmap_page), the
// DATA ring, then the AUX area. The "producer" (what PT hardware plus the kernel do)
// writes trace bytes and PERF_RECORD_AUX records and publishes data_head / aux_head with
// release stores; the recorder's readers run over it unchanged through PtRingSource.

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/types/span.h"
#include "recorder/pt/aux_ring.h"
#include "recorder/pt/pt_ring_source.h"

namespace ptd::pt::testing {

struct FakeKernelOptions {
  size_t data_size = 16 * 4096;  // powers of two, as the kernel requires
  size_t aux_size = 16 * 4096;
  bool overwrite = false;        // PROT_READ AUX mapping: snapshot mode
  AuxHeadKind head_kind = AuxHeadKind::kMonotonic;
  int cpu = 0;
  int tid = -1;
  uint32_t pid = 1234;           // sample_id of the records it writes
};

class FakePtKernel {
 public:
  explicit FakePtKernel(FakeKernelOptions options);
  ~FakePtKernel();
  FakePtKernel(const FakePtKernel&) = delete;
  FakePtKernel& operator=(const FakePtKernel&) = delete;

  // Producer side. Writes trace bytes as the hardware would and reports them with a
  // PERF_RECORD_AUX. Returns how many were stored: all of them in overwrite mode, what
  // fits before aux_tail in linear mode (the rest is dropped and TRUNCATED is set),
  // none while output is stopped (the hardware is off: nothing is traced).
  size_t WriteTrace(absl::Span<const uint8_t> bytes);
  // Appends an encoded perf record to the DATA ring; when it does not fit, counts it
  // lost and reports PERF_RECORD_LOST once there is room again, as the kernel does.
  bool WriteRecord(absl::Span<const uint8_t> record);

  // What StopOutput/ResumeOutput of the ring do.
  void Stop();
  void Resume();

  // A PtRingSource over this fake (the fake must outlive it).
  std::unique_ptr<PtRingSource> MakeSource();

  perf_event_mmap_page* header() const { return header_; }
  uint8_t* data() const { return base_ + kPage; }
  const uint8_t* aux() const { return base_ + kPage + options_.data_size; }
  const FakeKernelOptions& options() const { return options_; }
  uint64_t bytes_dropped() const;
  uint64_t aux_written() const;  // monotonic count of stored trace bytes
  int stop_calls() const;

  static constexpr size_t kPage = 4096;

 private:
  bool WriteRecordLocked(absl::Span<const uint8_t> record);
  void WriteAuxRecordLocked(uint64_t offset, uint64_t size, uint64_t flags);
  void PublishAuxHeadLocked();

  FakeKernelOptions options_;
  uint8_t* base_ = nullptr;
  perf_event_mmap_page* header_ = nullptr;
  mutable std::mutex mu_;  // the producer is one "CPU": its writes do not interleave
  uint64_t aux_head_ = 0;  // monotonic
  uint64_t data_head_ = 0;
  uint64_t dropped_ = 0;
  uint64_t lost_records_ = 0;
  bool stopped_ = false;
  int stop_calls_ = 0;
};

}  // namespace ptd::pt::testing
