#include "tests/recorder_pt/fake_ring_factory.h"

namespace ptd::pt::testing {

absl::StatusOr<std::unique_ptr<PtRingSource>> FakeRingFactory::Open(const PtRingRequest& request) {
  FakeKernelOptions options;
  options.data_size = request.data_size;
  options.aux_size = request.aux_size;
  options.overwrite = request.overwrite;
  options.cpu = request.cpu;
  options.tid = request.cpu < 0 ? request.tids.front() : -1;
  options.pid = static_cast<uint32_t>(request.tids.front());
  auto kernel = std::make_unique<FakePtKernel>(options);
  if (on_open) on_open(*kernel);
  std::unique_ptr<PtRingSource> source = kernel->MakeSource();
  std::lock_guard<std::mutex> lock(mu_);
  kernels_.push_back(std::move(kernel));
  requests_.push_back(request);
  return source;
}

absl::Status FakeRingFactory::AddThread(PtRingSource&, int) { return absl::OkStatus(); }

absl::Status FakeRingFactory::Enable(PtRingSource&) {
  std::lock_guard<std::mutex> lock(mu_);
  enables_++;
  return absl::OkStatus();
}

size_t FakeRingFactory::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kernels_.size();
}

FakePtKernel& FakeRingFactory::kernel(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  return *kernels_.at(i);
}

std::vector<PtRingRequest> FakeRingFactory::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

int FakeRingFactory::enables() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enables_;
}

}  // namespace ptd::pt::testing
