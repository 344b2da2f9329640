#pragma once
// File-backed executable mappings named by the MMAP / MMAP2 records of a sideband byte
// stream: what a decoder must load to follow the trace through that code.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "sideband/perf_record.h"

namespace ptd::perfdata {

struct ExecutableMapping {
  int32_t pid = -1;
  uint64_t vaddr = 0;
  uint64_t size = 0;
  uint64_t file_offset = 0;
  std::string name;      // path, or "[vdso]" ...
  std::string build_id;  // hex, when the MMAP2 record carries one
};

// Walks perf records (header.size framing; stops at the first malformed record).
std::vector<ExecutableMapping> ReadExecutableMappings(absl::Span<const uint8_t> records);

// The executable mapping an MMAP or MMAP2 record (parsed by sideband's RecordReader)
// names; nullopt for other records and data mappings.
std::optional<ExecutableMapping> ExecutableMappingOf(const PerfRecord& record);
// The same for one record's bytes (header included).
std::optional<ExecutableMapping> ExecutableMappingOf(absl::Span<const uint8_t> record);

}  // namespace ptd::perfdata
