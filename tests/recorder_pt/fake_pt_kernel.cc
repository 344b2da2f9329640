#include "tests/recorder_pt/fake_pt_kernel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "sideband/record_builder.h"

namespace ptd::pt::testing {
namespace {

class FakeRingSource : public PtRingSource {
 public:
  explicit FakeRingSource(FakePtKernel* kernel) : kernel_(kernel) {}
  perf_event_mmap_page* header() const override { return kernel_->header(); }
  uint8_t* data() const override { return kernel_->data(); }
  size_t data_size() const override { return kernel_->options().data_size; }
  const uint8_t* aux() const override { return kernel_->aux(); }
  size_t aux_size() const override { return kernel_->options().aux_size; }
  bool overwrite() const override { return kernel_->options().overwrite; }
  AuxHeadKind head_kind() const override { return kernel_->options().head_kind; }
  absl::Status StopOutput() override {
    kernel_->Stop();
    return absl::OkStatus();
  }
  absl::Status ResumeOutput() override {
    kernel_->Resume();
    return absl::OkStatus();
  }
  int poll_fd() const override { return -1; }
  int cpu() const override { return kernel_->options().cpu; }
  int tid() const override { return kernel_->options().tid; }

 private:
  FakePtKernel* kernel_;
};

}  // namespace

FakePtKernel::FakePtKernel(FakeKernelOptions options) : options_(options) {
  const size_t total = kPage + options_.data_size + options_.aux_size;
  base_ = static_cast<uint8_t*>(std::aligned_alloc(kPage, total));
  std::memset(base_, 0, total);  // the kernel hands out zeroed pages
  header_ = reinterpret_cast<perf_event_mmap_page*>(base_);
  header_->data_offset = kPage;
  header_->data_size = options_.data_size;
  header_->aux_offset = kPage + options_.data_size;
  header_->aux_size = options_.aux_size;
}

FakePtKernel::~FakePtKernel() { std::free(base_); }

std::unique_ptr<PtRingSource> FakePtKernel::MakeSource() {
  return std::make_unique<FakeRingSource>(this);
}

uint64_t FakePtKernel::bytes_dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

uint64_t FakePtKernel::aux_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aux_head_;
}

int FakePtKernel::stop_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_calls_;
}

void FakePtKernel::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  stop_calls_++;
  PublishAuxHeadLocked();
}

void FakePtKernel::Resume() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = false;
}

void FakePtKernel::PublishAuxHeadLocked() {
  const uint64_t published = options_.head_kind == AuxHeadKind::kBufferOffset
                                 ? aux_head_ % options_.aux_size
                                 : aux_head_;
  // Release: the AUX bytes and the PERF_RECORD_AUX are visible before the head.
  __atomic_store_n(&header_->aux_head, published, __ATOMIC_RELEASE);
}

bool FakePtKernel::WriteRecordLocked(absl::Span<const uint8_t> record) {
  const uint64_t tail = __atomic_load_n(&header_->data_tail, __ATOMIC_ACQUIRE);
  const size_t size = options_.data_size;
  auto fits = [&](size_t n) { return data_head_ + n - tail <= size; };
  if (lost_records_ != 0) {
    // PERF_RECORD_LOST {id, lost} + sample_id, reported before anything newer.
    PerfRecord lost;
    lost.body = LostRecord{0, lost_records_};
    RecordFormat format;
    std::vector<uint8_t> bytes = EncodeRecord(lost, format);
    if (!fits(bytes.size() + record.size())) {
      lost_records_++;
      return false;
    }
    lost_records_ = 0;
    for (size_t i = 0; i < bytes.size(); ++i) data()[(data_head_ + i) % size] = bytes[i];
    data_head_ += bytes.size();
  }
  if (!fits(record.size())) {
    lost_records_++;
    return false;
  }
  for (size_t i = 0; i < record.size(); ++i) data()[(data_head_ + i) % size] = record[i];
  data_head_ += record.size();
  __atomic_store_n(&header_->data_head, data_head_, __ATOMIC_RELEASE);
  return true;
}

bool FakePtKernel::WriteRecord(absl::Span<const uint8_t> record) {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteRecordLocked(record);
}

void FakePtKernel::WriteAuxRecordLocked(uint64_t offset, uint64_t size, uint64_t flags) {
  PerfRecord record;
  record.body = AuxRecord{offset, size, flags};
  record.sample_id.pid = options_.pid;
  record.sample_id.tid = options_.tid < 0 ? options_.pid : static_cast<uint32_t>(options_.tid);
  record.sample_id.cpu = options_.cpu < 0 ? 0 : static_cast<uint32_t>(options_.cpu);
  RecordFormat format;
  std::vector<uint8_t> bytes = EncodeRecord(record, format);
  WriteRecordLocked(bytes);
}

size_t FakePtKernel::WriteTrace(absl::Span<const uint8_t> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ || bytes.empty()) return 0;
  const size_t size = options_.aux_size;
  uint8_t* aux = base_ + kPage + options_.data_size;
  const uint64_t start = aux_head_;
  size_t stored = bytes.size();
  uint64_t flags = 0;
  if (options_.overwrite) {
    flags |= kPerfAuxFlagOverwrite;
  } else {
    // Linear: never overwrite what the reader has not released.
    const uint64_t tail = __atomic_load_n(&header_->aux_tail, __ATOMIC_ACQUIRE);
    const uint64_t free_bytes = size - (aux_head_ - tail);
    if (stored > free_bytes) {
      stored = static_cast<size_t>(free_bytes);
      flags |= kPerfAuxFlagTruncated;
      dropped_ += bytes.size() - stored;
    }
  }
  for (size_t i = 0; i < stored; ++i) aux[(start + i) % size] = bytes[i];
  aux_head_ += stored;
  const uint64_t reported_offset =
      options_.head_kind == AuxHeadKind::kBufferOffset ? start % size : start;
  if (stored != 0 || flags & ~kPerfAuxFlagOverwrite) {
    WriteAuxRecordLocked(reported_offset, stored, flags);
  }
  PublishAuxHeadLocked();
  return stored;
}

}  // namespace ptd::pt::testing
