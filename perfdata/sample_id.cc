#include "perfdata/sample_id.h"

#include <linux/perf_event.h>

#include <cstring>

namespace ptd::perfdata {
namespace {

uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void Store64(uint64_t v, std::string* out) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

bool ParseSampleIdTrailer(absl::Span<const uint8_t> record, uint64_t sample_type, SampleId* out) {
  const uint64_t size = SampleIdSize(sample_type);
  if (record.size() < 8 + size) return false;
  const uint8_t* p = record.data() + record.size() - size;
  *out = SampleId{};
  if (sample_type & PERF_SAMPLE_TID) {
    std::memcpy(&out->pid, p, 4);
    std::memcpy(&out->tid, p + 4, 4);
    p += 8;
  }
  if (sample_type & PERF_SAMPLE_TIME) {
    out->time = Load64(p);
    out->has_time = true;
    p += 8;
  }
  if (sample_type & PERF_SAMPLE_ID) {
    out->id = Load64(p);
    p += 8;
  }
  if (sample_type & PERF_SAMPLE_STREAM_ID) {
    out->stream_id = Load64(p);
    p += 8;
  }
  if (sample_type & PERF_SAMPLE_CPU) {
    std::memcpy(&out->cpu, p, 4);
    p += 8;
  }
  if (sample_type & PERF_SAMPLE_IDENTIFIER) out->id = Load64(p);
  return true;
}

void AppendSampleId(const SampleId& id, uint64_t sample_type, std::string* out) {
  if (sample_type & PERF_SAMPLE_TID) {
    out->append(reinterpret_cast<const char*>(&id.pid), 4);
    out->append(reinterpret_cast<const char*>(&id.tid), 4);
  }
  if (sample_type & PERF_SAMPLE_TIME) Store64(id.time, out);
  if (sample_type & PERF_SAMPLE_ID) Store64(id.id, out);
  if (sample_type & PERF_SAMPLE_STREAM_ID) Store64(id.stream_id, out);
  if (sample_type & PERF_SAMPLE_CPU) {
    const uint32_t reserved = 0;
    out->append(reinterpret_cast<const char*>(&id.cpu), 4);
    out->append(reinterpret_cast<const char*>(&reserved), 4);
  }
  if (sample_type & PERF_SAMPLE_IDENTIFIER) Store64(id.id, out);
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
