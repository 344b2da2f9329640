// The hardware side of the seam: intel_pt perf events and their mmaps.
#include <vector>

#include "absl/strings/str_cat.h"
#include "recorder/perf_event.h"
#include "recorder/perf_mmap.h"
#include "recorder/pt/pt_ring_factory.h"

namespace ptd::pt {
namespace {

class KernelPtRing : public PtRingSource {
 public:
  KernelPtRing(int cpu, int tid, bool overwrite, perf_event_attr attr, std::string filter)
      : cpu_(cpu), tid_(tid), overwrite_(overwrite), attr_(attr), filter_(std::move(filter)) {}

  perf_event_mmap_page* header() const override { return mmap_.header(); }
  uint8_t* data() const override { return mmap_.data(); }
  size_t data_size() const override { return mmap_.data_size(); }
  const uint8_t* aux() const override { return mmap_.aux(); }
  size_t aux_size() const override { return mmap_.aux_size(); }
  bool overwrite() const override { return overwrite_; }
  // arch/x86/events/intel/pt.c publishes the in-buffer write offset in snapshot mode.
  AuxHeadKind head_kind() const override {
    return overwrite_ ? AuxHeadKind::kBufferOffset : AuxHeadKind::kMonotonic;
  }

  // PERF_EVENT_IOC_PAUSE_OUTPUT keeps sideband from being written while we read; it does
  // not stop the PT hardware, so every event feeding the ring is also disabled, which
  // stops PT and makes the driver publish aux_head (pt_event_stop → perf_aux_output_end).
  absl::Status StopOutput() override {
    if (absl::Status st = events_.front().PauseOutput(true); !st.ok()) return st;
    for (PerfEvent& e : events_) {
      if (absl::Status st = e.Disable(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }
  absl::Status ResumeOutput() override {
    for (PerfEvent& e : events_) {
      if (absl::Status st = e.Enable(); !st.ok()) return st;
    }
    return events_.front().PauseOutput(false);
  }
  int poll_fd() const override { return events_.empty() ? -1 : events_.front().fd(); }
  int cpu() const override { return cpu_; }
  int tid() const override { return tid_; }

  absl::Status AddEvent(int tid, size_t data_size, size_t aux_size) {
    absl::StatusOr<PerfEvent> event = PerfEvent::Open(attr_, tid, cpu_);
    if (!event.ok()) return event.status();
    if (!filter_.empty()) {
      if (absl::Status st = event->SetFilter(filter_); !st.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--filter '", filter_, "': ", st.message()));
      }
    }
    if (events_.empty()) {
      absl::StatusOr<PerfMmap> mmap = PerfMmap::Map(*event, data_size);
      if (!mmap.ok()) return mmap.status();
      mmap_ = *std::move(mmap);
      if (absl::Status st = mmap_.MapAux(*event, aux_size, overwrite_); !st.ok()) return st;
    } else if (absl::Status st = event->SetOutput(events_.front()); !st.ok()) {
      return st;
    }
    events_.push_back(*std::move(event));
    return absl::OkStatus();
  }
  absl::Status EnableAll() {
    for (PerfEvent& e : events_) {
      if (absl::Status st = e.Enable(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  int cpu_;
  int tid_;
  bool overwrite_;
  perf_event_attr attr_;
  std::string filter_;
  std::vector<PerfEvent> events_;  // events_[0] owns the mapping
  PerfMmap mmap_;                  // unmapped before the events close (declared after)
};

class KernelPtRingFactory : public PtRingFactory {
 public:
  absl::StatusOr<std::unique_ptr<PtRingSource>> Open(const PtRingRequest& request) override {
    if (request.tids.empty()) return absl::InvalidArgumentError("PT ring without a thread");
    auto ring = std::make_unique<KernelPtRing>(
        request.cpu, request.cpu < 0 ? request.tids.front() : -1, request.overwrite,
        request.attr, request.filter);
    for (int tid : request.tids) {
      if (absl::Status st = ring->AddEvent(tid, request.data_size, request.aux_size); !st.ok()) {
        return st;
      }
    }
    return ring;
  }
  absl::Status AddThread(PtRingSource& ring, int tid) override {
    auto& kernel_ring = static_cast<KernelPtRing&>(ring);
    return kernel_ring.AddEvent(tid, ring.data_size(), ring.aux_size());
  }
  absl::Status Enable(PtRingSource& ring) override {
    return static_cast<KernelPtRing&>(ring).EnableAll();
  }
};

}  // namespace

std::unique_ptr<PtRingFactory> MakeKernelPtRingFactory() {
  return std::make_unique<KernelPtRingFactory>();
}

}  // namespace ptd::pt
