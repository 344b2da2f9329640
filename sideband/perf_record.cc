#include "sideband/perf_record.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ptd {

std::string PerfRecordTypeName(uint32_t type) {
  switch (type) {
    case kPerfRecordMmap: return "MMAP";
    case kPerfRecordLost: return "LOST";
    case kPerfRecordComm: return "COMM";
    case kPerfRecordExit: return "EXIT";
    case kPerfRecordThrottle: return "THROTTLE";
    case kPerfRecordUnthrottle: return "UNTHROTTLE";
    case kPerfRecordFork: return "FORK";
    case kPerfRecordRead: return "READ";
    case kPerfRecordSample: return "SAMPLE";
    case kPerfRecordMmap2: return "MMAP2";
    case kPerfRecordAux: return "AUX";
    case kPerfRecordItraceStart: return "ITRACE_START";
    case kPerfRecordLostSamples: return "LOST_SAMPLES";
    case kPerfRecordSwitch: return "SWITCH";
    case kPerfRecordSwitchCpuWide: return "SWITCH_CPU_WIDE";
    case kPerfRecordNamespaces: return "NAMESPACES";
    case kPerfRecordKsymbol: return "KSYMBOL";
    case kPerfRecordBpfEvent: return "BPF_EVENT";
    case kPerfRecordCgroup: return "CGROUP";
    case kPerfRecordTextPoke: return "TEXT_POKE";
    case kPerfRecordAuxOutputHwId: return "AUX_OUTPUT_HW_ID";
    default: return absl::StrCat("type ", type);
  }
}

bool RecordHasSampleIdTrailer(uint32_t type) {
  return type < kPerfRecordUserTypeStart && type != kPerfRecordSample;
}

size_t SampleIdSize(uint64_t sample_type) {
  size_t size = 0;
  SampleId id;
  ForEachSampleIdField(sample_type, id, [&size](bool, const auto& field) { size += sizeof(field); });
  return size;
}

SampleId ParseSampleId(const uint8_t* trailer, uint64_t sample_type) {
  SampleId id;
  ForEachSampleIdField(sample_type, id, [&trailer](bool& has, auto& field) {
    has = true;
    std::memcpy(&field, trailer, sizeof(field));
    trailer += sizeof(field);
  });
  return id;
}

}  // namespace ptd
