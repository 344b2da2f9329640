#include "perfdata/executable_mappings.h"

#include <linux/perf_event.h>
#include <sys/mman.h>

#include <cstring>

#include "absl/strings/str_format.h"

namespace ptd::perfdata {

std::vector<ExecutableMapping> ReadExecutableMappings(absl::Span<const uint8_t> records) {
  std::vector<ExecutableMapping> out;
  for (size_t pos = 0; pos + 8 <= records.size();) {
    uint32_t type;
    uint16_t misc, size;
    std::memcpy(&type, records.data() + pos, 4);
    std::memcpy(&misc, records.data() + pos + 4, 2);
    std::memcpy(&size, records.data() + pos + 6, 2);
    if (size < 8 || size > records.size() - pos) break;
    const uint8_t* r = records.data() + pos;
    pos += size;
    const bool mmap2 = type == PERF_RECORD_MMAP2;
    if (type != PERF_RECORD_MMAP && !mmap2) continue;
    // MMAP: pid, tid, addr, len, pgoff, filename. MMAP2 adds maj/min/ino/ino_generation
    // (or a build-id) and prot/flags before the filename.
    const size_t name_off = mmap2 ? 72 : 40;
    if (size <= name_off) continue;
    ExecutableMapping m;
    std::memcpy(&m.pid, r + 8, 4);
    std::memcpy(&m.vaddr, r + 16, 8);
    std::memcpy(&m.size, r + 24, 8);
    std::memcpy(&m.file_offset, r + 32, 8);
    if (mmap2) {
      uint32_t prot;
      std::memcpy(&prot, r + 64, 4);
      if (!(prot & PROT_EXEC)) continue;
      if (misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
        const uint8_t len = std::min<uint8_t>(r[40], 20);
        for (uint8_t i = 0; i < len; ++i) absl::StrAppendFormat(&m.build_id, "%02x", r[44 + i]);
      }
    } else if (misc & PERF_RECORD_MISC_MMAP_DATA) {
      continue;
    }
    const char* name = reinterpret_cast<const char*>(r + name_off);
    m.name.assign(name, strnlen(name, size - name_off));
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace ptd::perfdata
