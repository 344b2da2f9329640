#include "tests/recorder_pt/fake_pt_kernel.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

#include "sideband/record_builder.h"

namespace ptd::pt::testing {
namespace {

class FakeRingSource : public PtRingSource {
 public:
  explicit FakeRingSource(FakePtKernel* kernel) : kernel_(kernel) {}
  ~FakeRingSource() override { kernel_->Unmap(); }
  perf_event_mmap_page* header() const override { return kernel_->header(); }
  uint8_t* data() const override { return kernel_->data(); }
  size_t data_size() const override { return kernel_->options().data_size; }
  const uint8_t* aux() const override { return kernel_->aux(); }
  size_t aux_size() const override { return kernel_->options().aux_size; }
  bool overwrite() const override { return kernel_->options().overwrite; }
  absl::Status DisablePt() override {
    kernel_->DisablePt();
    if (kernel_->on_pt_disabled) kernel_->on_pt_disabled();
    return absl::OkStatus();
  }
  absl::Status EnablePt() override {
    kernel_->EnablePt();
    if (kernel_->on_pt_enabled) kernel_->on_pt_enabled();
    return absl::OkStatus();
  }
  std::vector<int> poll_fds() const override { return kernel_->poll_fds(); }
  int cpu() const override { return kernel_->options().cpu; }
  int tid() const override { return kernel_->options().tid; }

 private:
  FakePtKernel* kernel_;
};

}  // namespace

std::vector<uint8_t> TraceBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n;) {
    if (rng() % 256 == 0) {
      // The longest PAD runs in the raw PT samples (shared/samples/libxdc_experiments)
      // are 12 to 15 bytes.
      const size_t run = std::min<size_t>(n - i, 1 + rng() % 16);
      std::fill_n(out.begin() + static_cast<ptrdiff_t>(i), run, 0);
      i += run;
    } else {
      out[i++] = static_cast<uint8_t>(rng() | 1);
    }
  }
  return out;
}

FakePtKernel::FakePtKernel(FakeKernelOptions options) : options_(options) {
  const size_t total = kPage + options_.data_size + options_.aux_size;
  base_ = static_cast<uint8_t*>(std::aligned_alloc(kPage, total));
  std::memset(base_, 0, total);  // the kernel hands out zeroed pages
  header_ = reinterpret_cast<perf_event_mmap_page*>(base_);
  header_->data_offset = kPage;
  header_->data_size = options_.data_size;
  header_->aux_offset = kPage + options_.data_size;
  header_->aux_size = options_.aux_size;
  tracking_enabled_ = options_.enabled;
  region_size_ = options_.region_size;
  if (region_size_ == 0) {
    // rb_alloc_aux: max_order = get_order(watermark), each chunk min(max_order,
    // ilog2(pages left)) and at most MAX_PAGE_ORDER; with a power-of-two page count all
    // chunks come out the same size.
    region_size_ = kPage;
    while (region_size_ < Watermark() && region_size_ < options_.aux_size &&
           region_size_ < (size_t{4} << 20)) {
      region_size_ *= 2;
    }
  }
  AddEvent(options_.tid >= 0 ? options_.tid : static_cast<int>(options_.pid), options_.enabled);
}

FakePtKernel::~FakePtKernel() {
  for (Event& e : events_) {
    if (e.read_fd >= 0) close(e.read_fd);
    if (e.write_fd >= 0) close(e.write_fd);
  }
  std::free(base_);
}

void FakePtKernel::AddEvent(int tid, bool enabled) {
  std::lock_guard<std::mutex> lock(mu_);
  Event event;
  event.tid = tid;
  event.pt_enabled = enabled;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    event.read_fd = fds[0];
    event.write_fd = fds[1];
  }
  events_.push_back(event);
}

FakePtKernel::Event* FakePtKernel::Find(int tid) {
  for (Event& e : events_) {
    if (e.tid == tid) return &e;
  }
  return nullptr;
}

void FakePtKernel::RunTask(int tid) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < events_.size(); ++i) {
    if (events_[i].tid == tid) running_ = i;
  }
}

int FakePtKernel::poll_fd() const { return Locked(events_).front().read_fd; }

std::vector<int> FakePtKernel::poll_fds() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> fds;
  for (const Event& e : events_) fds.push_back(e.read_fd);
  return fds;
}

bool FakePtKernel::unmapped() const { return Locked(unmapped_); }

void FakePtKernel::Unmap() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (unmapped_) return;
    unmapped_ = true;
    for (Event& e : events_) {
      if (e.write_fd >= 0) close(e.write_fd);
      e.write_fd = -1;
    }
  }
  if (on_unmapped) on_unmapped();
}

uint64_t FakePtKernel::wakeups() const { return Locked(wakeups_); }

void FakePtKernel::WakeLocked() {
  wakeups_++;
  if (wake_pending_) return;
  wake_pending_ = true;
  const uint8_t byte = 1;
  for (Event& e : events_) {
    if (e.write_fd >= 0) (void)!write(e.write_fd, &byte, 1);
  }
}

void FakePtKernel::ClearWakeupLocked() {
  if (!wake_pending_) return;
  const uint64_t tail = __atomic_load_n(&header_->aux_tail, __ATOMIC_ACQUIRE);
  if (tail < aux_published_) return;  // not read yet: still readable
  wake_pending_ = false;
  for (Event& e : events_) {
    uint8_t buf[16];
    while (e.read_fd >= 0 && read(e.read_fd, buf, sizeof(buf)) > 0) {
    }
  }
}

std::unique_ptr<PtRingSource> FakePtKernel::MakeSource() {
  return std::make_unique<FakeRingSource>(this);
}

uint64_t FakePtKernel::bytes_dropped() const { return Locked(dropped_); }
uint64_t FakePtKernel::aux_written() const { return Locked(aux_head_); }
bool FakePtKernel::pt_enabled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Running().pt_enabled;
}
bool FakePtKernel::pt_enabled(int tid) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Event& e : events_) {
    if (e.tid == tid) return e.pt_enabled;
  }
  return false;
}
int FakePtKernel::disable_calls() const { return Locked(disable_calls_); }
uint64_t FakePtKernel::sideband_not_generated() const { return Locked(sideband_not_generated_); }

void FakePtKernel::ExitTask() { ExitTask(Locked(events_).front().tid); }

void FakePtKernel::ExitTask(int tid) {
  std::lock_guard<std::mutex> lock(mu_);
  Event* e = Find(tid);
  if (e == nullptr) return;
  // perf_event_exit_task: the running event stops (pt_event_stop publishes its trace).
  if (e == &Running() && e->pt_enabled) StopPtLocked();
  e->pt_enabled = false;
  if (e->write_fd >= 0) close(e->write_fd);
  e->write_fd = -1;
}

uint64_t FakePtKernel::Watermark() const {
  return options_.aux_watermark != 0 ? options_.aux_watermark : options_.aux_size / 2;
}

bool FakePtKernel::BeginLinearTransactionLocked() {
  const uint64_t size = options_.aux_size;
  const uint64_t tail = __atomic_load_n(&header_->aux_tail, __ATOMIC_ACQUIRE);
  // perf_aux_output_begin: handle->size = CIRC_SPACE(head, tail, size).
  const uint64_t used = aux_head_ - tail;
  const uint64_t room = used < size ? size - 1 - used : 0;
  if (room == 0) {
    // No room: pending_disable and a wakeup, no record, and the hardware never starts
    // (pt_event_start: PERF_HES_STOPPED).
    Running().pt_enabled = false;
    WakeLocked();
    return false;
  }
  // pt_buffer_reset_markers: "can't stop in the middle of an output region".
  if (aux_head_ % region_size_ + room + 1 < region_size_) {
    transaction_open_ = true;
    EndLinearTransactionLocked(kPerfAuxFlagTruncated);
    Running().pt_enabled = false;
    return false;
  }
  uint64_t npages = room / kPage;
  if ((aux_head_ + room + 1) % kPage == 0) npages++;  // "fill up one more page"
  // STOP/INT on the entry before the one holding page idx: the hardware stops where
  // that page's region begins.
  const uint64_t stop_page = aux_head_ / kPage + npages;
  stop_at_ = stop_page * kPage / region_size_ * region_size_;
  const uint64_t wakeup_page = (aux_wakeup_ + Watermark()) / kPage;
  const uint64_t intr_page = std::min(aux_head_ / kPage + npages - 1, wakeup_page);
  intr_at_ = intr_page * kPage / region_size_ * region_size_;
  if (intr_at_ <= aux_head_) intr_at_ += size;  // that entry comes round a lap later
  transaction_open_ = true;
  return true;
}

void FakePtKernel::EndLinearTransactionLocked(uint64_t flags) {
  transaction_open_ = false;
  const uint64_t size = aux_head_ - aux_published_;
  // perf_aux_output_end: a record only when there is a size or a flag, then the head.
  if (size != 0 || flags != 0) WriteAuxRecordLocked(aux_published_, size, flags);
  aux_published_ = aux_head_;
  // Release: the AUX bytes and the PERF_RECORD_AUX are visible before the head.
  __atomic_store_n(&header_->aux_head, aux_published_, __ATOMIC_RELEASE);
  // rb_need_aux_wakeup: a wakeup each time the published head passes the watermark
  // (aux_wakeup rounded down to it); a truncation wakes too.
  const uint64_t watermark = Watermark();
  bool wakeup = (flags & kPerfAuxFlagTruncated) != 0;
  if (aux_published_ - aux_wakeup_ >= watermark) {
    aux_wakeup_ = aux_published_ / watermark * watermark;
    wakeup = true;
  }
  if (wakeup) WakeLocked();
}

void FakePtKernel::StopPtLocked() {
  if (!options_.overwrite) {
    EndLinearTransactionLocked(0);
    return;
  }
  // pt_update_head (snapshot): data_size = in-buffer offset; pt_event_stop then hands
  // that offset over as the head and nr_pages << PAGE_SHIFT as the size.
  const uint64_t offset = aux_head_ % options_.aux_size;
  WriteAuxRecordLocked(offset, options_.aux_size, kPerfAuxFlagOverwrite);
  // Release: the AUX bytes and the PERF_RECORD_AUX are visible before the head.
  __atomic_store_n(&header_->aux_head, offset, __ATOMIC_RELEASE);
}

void FakePtKernel::SchedOut() {
  std::lock_guard<std::mutex> lock(mu_);
  ClearWakeupLocked();
  if (Running().pt_enabled) StopPtLocked();
}

void FakePtKernel::DisablePt() {
  std::lock_guard<std::mutex> lock(mu_);
  ClearWakeupLocked();
  disable_calls_++;
  // Only the running event has the hardware; the others are stopped already.
  if (Running().pt_enabled) StopPtLocked();
  for (Event& e : events_) e.pt_enabled = false;
}

void FakePtKernel::EnablePt() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Event& e : events_) e.pt_enabled = true;
}

void FakePtKernel::EnableAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Event& e : events_) e.pt_enabled = true;
  tracking_enabled_ = true;
}

void FakePtKernel::SetTrackingEnabled(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  tracking_enabled_ = on;
}

void FakePtKernel::PauseOutput(bool pause) {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = pause;
}

bool FakePtKernel::WriteRecordLocked(absl::Span<const uint8_t> record) {
  if (paused_) {
    lost_records_++;
    return false;
  }
  const uint64_t tail = __atomic_load_n(&header_->data_tail, __ATOMIC_ACQUIRE);
  const size_t size = options_.data_size;
  auto fits = [&](size_t n) { return data_head_ + n - tail <= size; };
  std::vector<uint8_t> lost_bytes;
  if (lost_records_ != 0) {
    // PERF_RECORD_LOST {id, lost} + sample_id, written in front of this record.
    PerfRecord lost;
    lost.body = LostRecord{0, lost_records_};
    lost_bytes = EncodeRecord(lost, RecordFormat{});
  }
  if (!fits(lost_bytes.size() + record.size())) {
    lost_records_++;
    return false;
  }
  lost_records_ = 0;
  for (absl::Span<const uint8_t> bytes : {absl::MakeConstSpan(lost_bytes), record}) {
    for (size_t i = 0; i < bytes.size(); ++i) data()[(data_head_ + i) % size] = bytes[i];
    data_head_ += bytes.size();
  }
  __atomic_store_n(&header_->data_head, data_head_, __ATOMIC_RELEASE);
  return true;
}

bool FakePtKernel::WriteRecord(absl::Span<const uint8_t> record) {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteRecordLocked(record);
}

bool FakePtKernel::EmitSideband(absl::Span<const uint8_t> record) {
  std::lock_guard<std::mutex> lock(mu_);
  ClearWakeupLocked();
  const bool wanted = (options_.sideband_on_pt && Running().pt_enabled) ||
                      (options_.tracking_event && tracking_enabled_);
  if (!wanted) {
    sideband_not_generated_++;
    return false;
  }
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
  ClearWakeupLocked();
  if (bytes.empty()) return 0;
  if (!Running().pt_enabled) {
    dropped_ += bytes.size();
    return 0;
  }
  const size_t size = options_.aux_size;
  uint8_t* aux = base_ + kPage + options_.data_size;
  auto store = [&](const uint8_t* from, size_t n) {
    for (size_t i = 0; i < n; ++i) aux[(aux_head_ + i) % size] = from[i];
    aux_head_ += n;
  };
  if (options_.overwrite) {
    store(bytes.data(), bytes.size());
    return bytes.size();  // published when the event stops
  }
  if (!transaction_open_ && !BeginLinearTransactionLocked()) {
    dropped_ += bytes.size();
    return 0;
  }
  size_t stored = 0;
  while (stored < bytes.size()) {
    const uint64_t next = std::min(stop_at_, intr_at_);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes.size() - stored, next - aux_head_));
    store(bytes.data() + stored, n);
    stored += n;
    if (aux_head_ == stop_at_) {
      // The STOP region is full: the hardware stops, the PMI finds STOPPED at a region's
      // end (pt_handle_status: TRUNCATED) and perf_aux_output_end disables the event.
      dropped_ += bytes.size() - stored;
      EndLinearTransactionLocked(kPerfAuxFlagTruncated);
      Running().pt_enabled = false;
      return stored;
    }
    if (aux_head_ == intr_at_) {
      // The PMI (intel_pt_interrupt): the transaction ends, the next begins.
      EndLinearTransactionLocked(0);
      if (!BeginLinearTransactionLocked()) {
        dropped_ += bytes.size() - stored;
        return stored;
      }
    }
  }
  return stored;
}

}  // namespace ptd::pt::testing
