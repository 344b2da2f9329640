// The hardware side of the seam: intel_pt perf events and their mmaps.
#include <vector>

#include "absl/strings/str_cat.h"
#include "recorder/sideband/perf_event.h"
#include "recorder/sideband/perf_mmap.h"
#include "recorder/pt/pt_ring_factory.h"

namespace ptd::pt {
namespace {

class KernelPtRing : public PtRingSource {
 public:
  KernelPtRing(const PtRingRequest& request) : request_(request) {}

  perf_event_mmap_page* header() const override { return mmap_.header(); }
  uint8_t* data() const override { return mmap_.data(); }
  size_t data_size() const override { return mmap_.data_size(); }
  const uint8_t* aux() const override { return mmap_.aux(); }
  size_t aux_size() const override { return mmap_.aux_size(); }
  bool overwrite() const override { return request_.overwrite; }

  absl::Status DisablePt() override {
    for (PerfEvent& e : pt_events_) {
      if (absl::Status st = e.Disable(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }
  absl::Status EnablePt() override {
    for (PerfEvent& e : pt_events_) {
      if (absl::Status st = e.Enable(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }
  std::vector<int> poll_fds() const override {
    std::vector<int> fds;
    for (const PerfEvent& e : pt_events_) fds.push_back(e.fd());
    return fds;
  }
  int cpu() const override { return request_.cpu; }
  int tid() const override { return request_.cpu < 0 ? request_.tid : -1; }

  // The PT event and the tracking event of `tid` (of the cgroup, for a cgroup request);
  // the first PT event owns the mapping, everything else is redirected into it.
  absl::Status AddThread(int tid) {
    const PerfOpenTarget on = PerfOpenTargetOf(request_, tid);
    absl::StatusOr<PerfEvent> pt = PerfEvent::Open(request_.attr, on.pid, on.cpu, -1, on.flags);
    if (!pt.ok()) return pt.status();
    if (!request_.filter.empty()) {
      if (absl::Status st = pt->SetFilter(request_.filter); !st.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--filter '", request_.filter, "': ", st.message()));
      }
    }
    absl::StatusOr<PerfEvent> tracking =
        PerfEvent::Open(request_.tracking_attr, on.pid, on.cpu, -1, on.flags);
    if (!tracking.ok()) return tracking.status();
    if (pt_events_.empty()) {
      absl::StatusOr<PerfMmap> mmap = PerfMmap::Map(*pt, request_.data_size);
      if (!mmap.ok()) return mmap.status();
      mmap_ = *std::move(mmap);
      if (absl::Status st = mmap_.MapAux(*pt, request_.aux_size, request_.overwrite);
          !st.ok()) {
        return st;
      }
    } else if (absl::Status st = pt->SetOutput(pt_events_.front()); !st.ok()) {
      return st;
    }
    if (absl::Status st = tracking->SetOutput(pt_events_.empty() ? *pt : pt_events_.front());
        !st.ok()) {
      return st;
    }
    pt_events_.push_back(*std::move(pt));
    tracking_events_.push_back(*std::move(tracking));
    return absl::OkStatus();
  }
  absl::Status EnableAll() {
    for (std::vector<PerfEvent>* events : {&tracking_events_, &pt_events_}) {
      for (PerfEvent& e : *events) {
        if (absl::Status st = e.Enable(); !st.ok()) return st;
      }
    }
    return absl::OkStatus();
  }

 private:
  PtRingRequest request_;
  std::vector<PerfEvent> pt_events_;  // pt_events_[0] owns the mapping
  std::vector<PerfEvent> tracking_events_;
  PerfMmap mmap_;                     // unmapped before the events close (declared after)
};

class KernelPtRingFactory : public PtRingFactory {
 public:
  absl::StatusOr<std::unique_ptr<PtRingSource>> Open(const PtRingRequest& request) override {
    if (request.tid <= 0 && request.cgroup_fd < 0) {
      return absl::InvalidArgumentError("PT ring without a thread or cgroup");
    }
    auto ring = std::make_unique<KernelPtRing>(request);
    if (absl::Status st = ring->AddThread(request.tid); !st.ok()) return st;
    return ring;
  }
  absl::Status AddThread(PtRingSource& ring, int tid) override {
    return static_cast<KernelPtRing&>(ring).AddThread(tid);
  }
  absl::Status Enable(PtRingSource& ring) override {
    return static_cast<KernelPtRing&>(ring).EnableAll();
  }
};

}  // namespace

PerfOpenTarget PerfOpenTargetOf(const PtRingRequest& request, int tid) {
  if (request.cgroup_fd >= 0) return {request.cgroup_fd, request.cpu, PERF_FLAG_PID_CGROUP};
  return {tid, request.cpu, 0};
}

std::unique_ptr<PtRingFactory> MakeKernelPtRingFactory() {
  return std::make_unique<KernelPtRingFactory>();
}

}  // namespace ptd::pt
