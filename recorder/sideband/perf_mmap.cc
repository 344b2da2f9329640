#include "recorder/sideband/perf_mmap.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ptd {
namespace {

bool IsPowerOfTwo(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

absl::Status CheckRingSize(size_t bytes, const char* what) {
  size_t page = PageSize();
  if (bytes == 0 || bytes % page != 0 || !IsPowerOfTwo(bytes / page)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s size %d bytes is not a power-of-two number of %d-byte pages", what, bytes, page));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PerfMmapError(int err, const char* area, size_t bytes, bool overwrite) {
  std::string what = absl::StrFormat("mmap of the %d-byte %s%s failed: %s", bytes, area,
                                     overwrite ? " (snapshot mode)" : "", std::strerror(err));
  if (err == EPERM) {
    // perf_mmap(): beyond perf_event_mlock_kb per online CPU, pages count against
    // RLIMIT_MEMLOCK, and only CAP_IPC_LOCK (not CAP_PERFMON) or paranoid -1 lifts it.
    return absl::PermissionDeniedError(absl::StrCat(
        what, "; the rings exceed the locked-memory allowance for users without "
              "CAP_IPC_LOCK (kernel.perf_event_mlock_kb per CPU, plus ulimit -l): use "
              "smaller --buffer-size / --snapshot-size / --data-size, raise "
              "kernel.perf_event_mlock_kb, or grant CAP_IPC_LOCK"));
  }
  if (err == ENOMEM) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, "; the kernel could not allocate it. On CPUs without multiple ToPA entries "
              "(caps/topa_multiple_entries = 0) a snapshot buffer must be one contiguous "
              "allocation: use a smaller --snapshot-size"));
  }
  return absl::InternalError(what);
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

size_t RoundUpToRingSize(uint64_t bytes) {
  size_t ring = PageSize();
  while (ring < bytes) ring <<= 1;
  return ring;
}

absl::StatusOr<PerfMmap> PerfMmap::Map(const PerfEvent& event, size_t data_bytes) {
  if (absl::Status st = CheckRingSize(data_bytes, "DATA ring"); !st.ok()) return st;
  size_t length = PageSize() + data_bytes;
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, event.fd(), 0);
  if (base == MAP_FAILED) return PerfMmapError(errno, "DATA ring", data_bytes, false);
  PerfMmap m;
  m.base_ = base;
  m.data_size_ = data_bytes;
  return m;
}

absl::Status PerfMmap::MapAux(const PerfEvent& event, size_t aux_bytes, bool overwrite) {
  if (base_ == nullptr) return absl::FailedPreconditionError("AUX mmap before the DATA mmap");
  if (aux_ != nullptr) return absl::FailedPreconditionError("AUX area already mapped");
  if (absl::Status st = CheckRingSize(aux_bytes, "AUX area"); !st.ok()) return st;
  perf_event_mmap_page* h = header();
  h->aux_offset = PageSize() + data_size_;
  h->aux_size = aux_bytes;
  int prot = overwrite ? PROT_READ : PROT_READ | PROT_WRITE;
  void* aux = ::mmap(nullptr, aux_bytes, prot, MAP_SHARED, event.fd(),
                     static_cast<off_t>(h->aux_offset));
  if (aux == MAP_FAILED) return PerfMmapError(errno, "AUX area", aux_bytes, overwrite);
  aux_ = aux;
  aux_size_ = aux_bytes;
  aux_overwrite_ = overwrite;
  return absl::OkStatus();
}

PerfMmap::PerfMmap(PerfMmap&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      data_size_(std::exchange(other.data_size_, 0)),
      aux_(std::exchange(other.aux_, nullptr)),
      aux_size_(std::exchange(other.aux_size_, 0)),
      aux_overwrite_(other.aux_overwrite_) {}

PerfMmap& PerfMmap::operator=(PerfMmap&& other) noexcept {
  if (this != &other) {
    Unmap();
    base_ = std::exchange(other.base_, nullptr);
    data_size_ = std::exchange(other.data_size_, 0);
    aux_ = std::exchange(other.aux_, nullptr);
    aux_size_ = std::exchange(other.aux_size_, 0);
    aux_overwrite_ = other.aux_overwrite_;
  }
  return *this;
}

PerfMmap::~PerfMmap() { Unmap(); }

void PerfMmap::Unmap() {
  // The AUX area goes first: the kernel ties it to the DATA mapping's ring buffer.
  if (aux_ != nullptr) ::munmap(aux_, aux_size_);
  if (base_ != nullptr) ::munmap(base_, PageSize() + data_size_);
  aux_ = nullptr;
  aux_size_ = 0;
  base_ = nullptr;
  data_size_ = 0;
}

}  // namespace ptd
