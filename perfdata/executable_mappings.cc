#include "perfdata/executable_mappings.h"

#include <sys/mman.h>

#include <algorithm>
#include <variant>

#include "common/hex.h"
#include "sideband/record_reader.h"

namespace ptd::perfdata {
namespace {

// Only the fixed fields and the file name are read: no sample_id trailer is assumed, so
// whatever follows the name is ignored.
constexpr RecordFormat kMmapFieldsOnly{.sample_type = 0, .sample_id_all = false};

}  // namespace

std::optional<ExecutableMapping> ExecutableMappingOf(const PerfRecord& record) {
  ExecutableMapping m;
  if (const auto* r = std::get_if<Mmap2Record>(&record.body)) {
    if (!(r->prot & PROT_EXEC)) return std::nullopt;
    m = {static_cast<int32_t>(r->pid), r->addr, r->len, r->pgoff, r->filename, ""};
    if (r->has_build_id) {
      m.build_id = HexString(absl::MakeConstSpan(r->build_id.data(), std::min<size_t>(r->build_id_size, 20)));
    }
    return m;
  }
  if (const auto* r = std::get_if<MmapRecord>(&record.body)) {
    if (r->data) return std::nullopt;
    return ExecutableMapping{static_cast<int32_t>(r->pid), r->addr, r->len, r->pgoff, r->filename, ""};
  }
  return std::nullopt;
}

std::optional<ExecutableMapping> ExecutableMappingOf(absl::Span<const uint8_t> record) {
  RecordReader reader(record, "perf record", kMmapFieldsOnly);
  absl::StatusOr<std::optional<PerfRecord>> parsed = reader.Next();
  if (!parsed.ok() || !parsed->has_value()) return std::nullopt;
  return ExecutableMappingOf(**parsed);
}

std::vector<ExecutableMapping> ReadExecutableMappings(absl::Span<const uint8_t> records) {
  std::vector<ExecutableMapping> out;
  RecordReader reader(records, "perf records", kMmapFieldsOnly);
  for (absl::StatusOr<std::optional<PerfRecord>> r = reader.Next(); r.ok() && r->has_value(); r = reader.Next()) {
    if (std::optional<ExecutableMapping> m = ExecutableMappingOf(**r)) out.push_back(*std::move(m));
  }
  return out;
}

}  // namespace ptd::perfdata
