#include "perfdata/sample_id.h"

#include <linux/perf_event.h>

namespace ptd::perfdata {

bool ParseSampleIdTrailer(absl::Span<const uint8_t> record, uint64_t sample_type, SampleId* out) {
  const uint64_t size = SampleIdSize(sample_type);
  if (record.size() < 8 + size) return false;
  *out = ParseSampleId(record.data() + record.size() - size, sample_type);
  return true;
}

void AppendSampleId(const SampleId& id, uint64_t sample_type, std::string* out) {
  ForEachSampleIdField(sample_type, id, [out](bool, const auto& field) {
    out->append(reinterpret_cast<const char*>(&field), sizeof(field));
  });
}

int SampleRecordIdOffset(uint64_t sample_type) {
  if (sample_type & PERF_SAMPLE_IDENTIFIER) return 8;
  if (!(sample_type & PERF_SAMPLE_ID)) return -1;
  int offset = 8;
  for (uint64_t bit : {PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ADDR}) {
    if (sample_type & bit) offset += 8;
  }
  return offset;
}

}  // namespace ptd::perfdata
