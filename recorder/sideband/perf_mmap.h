#pragma once
// An owned mmap of a perf event's ring: the header page (struct perf_event_mmap_page),
// 2^n DATA pages and, optionally, an AUX area. Readers (DataRing, the AUX readers) only
// borrow the pointers, so the same readers run over a fake in-process buffer in tests.

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recorder/sideband/perf_event.h"

namespace ptd {

// The smallest DATA size of 2^n pages (n >= 0) that holds at least `bytes`.
size_t RoundUpToRingSize(uint64_t bytes);
size_t PageSize();

// The status for mmap of a perf ring failing with `err`: EPERM explains the locked-memory
// limit (perf_event_mlock_kb, RLIMIT_MEMLOCK, CAP_IPC_LOCK), ENOMEM the contiguous AUX
// allocation of CPUs with a single ToPA entry.
absl::Status PerfMmapError(int err, const char* area, size_t bytes, bool overwrite);

class PerfMmap {
 public:
  // Maps the header page + `data_bytes` of DATA ring (a power-of-two number of pages;
  // see RoundUpToRingSize) read-write, so the reader can store data_tail.
  static absl::StatusOr<PerfMmap> Map(const PerfEvent& event, size_t data_bytes);

  PerfMmap() = default;
  PerfMmap(PerfMmap&& other) noexcept;
  PerfMmap& operator=(PerfMmap&& other) noexcept;
  PerfMmap(const PerfMmap&) = delete;
  PerfMmap& operator=(const PerfMmap&) = delete;
  ~PerfMmap();

  // Maps the AUX area after the DATA ring: `aux_bytes` is a power-of-two number of pages.
  // `overwrite` maps it PROT_READ (snapshot mode: the kernel overwrites the oldest data);
  // otherwise PROT_READ|PROT_WRITE (linear mode: the reader advances aux_tail).
  absl::Status MapAux(const PerfEvent& event, size_t aux_bytes, bool overwrite);

  bool valid() const { return base_ != nullptr; }
  perf_event_mmap_page* header() const { return static_cast<perf_event_mmap_page*>(base_); }
  uint8_t* data() const { return static_cast<uint8_t*>(base_) + PageSize(); }
  size_t data_size() const { return data_size_; }
  uint8_t* aux() const { return static_cast<uint8_t*>(aux_); }
  size_t aux_size() const { return aux_size_; }
  bool aux_overwrite() const { return aux_overwrite_; }

  void Unmap();

 private:
  void* base_ = nullptr;
  size_t data_size_ = 0;
  void* aux_ = nullptr;
  size_t aux_size_ = 0;
  bool aux_overwrite_ = false;
};

}  // namespace ptd
