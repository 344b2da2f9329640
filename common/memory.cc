#include "common/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace ptd {

void PrefaultForWrite(void* data, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (bytes < kMinPrefaultBytes) return;
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(page - 1);
  if (end <= begin) return;
  // Failure (an old kernel: EINVAL) leaves the pages to fault in as before.
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace ptd
