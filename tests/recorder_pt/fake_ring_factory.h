#pragma once
// A PtRingFactory that hands out fake-kernel rings instead of perf_event_open + mmap:
// the recording flow above it (PtRecording, RecordHardware, ptd::Recorder) runs unchanged.

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "recorder/pt/pt_ring_factory.h"
#include "tests/recorder_pt/fake_pt_kernel.h"

namespace ptd::pt::testing {

class FakeRingFactory : public PtRingFactory {
 public:
  // Called with each new fake kernel before its ring is handed out (e.g. to pre-fill it).
  std::function<void(FakePtKernel&)> on_open;

  absl::StatusOr<std::unique_ptr<PtRingSource>> Open(const PtRingRequest& request) override;
  absl::Status AddThread(PtRingSource& ring, int tid) override;
  absl::Status Enable(PtRingSource& ring) override;

  size_t size() const;
  FakePtKernel& kernel(size_t i);
  std::vector<PtRingRequest> requests() const;
  int enables() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FakePtKernel>> kernels_;
  std::vector<PtRingRequest> requests_;
  int enables_ = 0;
};

}  // namespace ptd::pt::testing
