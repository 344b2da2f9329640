#include "tests/recorder_core/recorded_sideband.h"

#include "common/file_util.h"
#include "common/trace_dir.h"
#include "sideband/record_reader.h"

namespace ptd::testing {

absl::StatusOr<RecordedSideband> LoadRecordedSideband(const std::string& trace_dir) {
  RecordedSideband out;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace_dir);
  if (!meta.ok()) return meta.status();
  out.meta = *meta;
  for (const SidebandFile& f : out.meta.sideband) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(ResolveTracePath(trace_dir, f.file));
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<RecordList> list =
        ReadAllRecords(*bytes, f.file, RecordFormat{f.sample_type, f.sample_id_all});
    if (!list.ok()) return list.status();
    for (PerfRecord& r : list->records) out.records.push_back({std::move(r), f.file, f.origin});
  }
  return out;
}

}  // namespace ptd::testing
