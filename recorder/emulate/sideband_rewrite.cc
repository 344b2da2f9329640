#include "recorder/emulate/sideband_rewrite.h"

#include <algorithm>
#include <variant>
#include <vector>

#include "common/file_util.h"
#include "sideband/record_builder.h"

namespace ptd {

absl::StatusOr<RewrittenTimes> RewriteSidebandFile(const std::string& path, const RecordFormat& format,
                                                   const SidebandRewrite& rewrite) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  RecordList list = ReadRecordsUpToError(*bytes, path, format);
  RecordBuilder builder(format);
  RewrittenTimes times;
  uint64_t parsed_bytes = 0;
  for (PerfRecord& record : list.records) {
    parsed_bytes += record.size;
    if (rewrite.drop_switches && (std::holds_alternative<SwitchRecord>(record.body) ||
                                  std::holds_alternative<SwitchCpuWideRecord>(record.body))) {
      continue;
    }
    if (rewrite.retime && record.sample_id.has_time) {
      const int pid = static_cast<int>(record.sample_id.pid);
      const int tid = static_cast<int>(record.sample_id.tid);
      // A FORK's or EXIT's own time is the kernel's clock at the same moment.
      auto retime_task = [&](auto& task) { task.time = rewrite.retime(pid, tid, task.time); };
      if (auto* fork = std::get_if<ForkRecord>(&record.body)) retime_task(*fork);
      if (auto* exit = std::get_if<ExitRecord>(&record.body)) retime_task(*exit);
      record.sample_id.time = rewrite.retime(pid, tid, record.sample_id.time);
    }
    if (record.sample_id.has_time) {
      times.first = std::min(times.first, record.sample_id.time);
      times.last = std::max(times.last, record.sample_id.time);
    }
    builder.Append(record);
  }
  std::vector<uint8_t> out = builder.Take();
  out.insert(out.end(), bytes->begin() + static_cast<long>(std::min<uint64_t>(parsed_bytes, bytes->size())),
             bytes->end());
  if (absl::Status s = WriteFileAtomic(path, absl::Span<const uint8_t>(out)); !s.ok()) return s;
  return times;
}

}  // namespace ptd
