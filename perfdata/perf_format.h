#pragma once
// perf.data on-disk constants that <linux/perf_event.h> does not define: the file
// header, perf's own record types (>= 64, never produced by the kernel) and feature ids.
// Source: tools/perf/Documentation/perf.data-file-format.txt and tools/perf/util/header.h.

#include <cstdint>

namespace ptd::perfdata {

inline constexpr uint64_t kPerfFileMagic = 0x32454c4946524550ULL;  // "PERFILE2" little-endian
inline constexpr uint64_t kPerfFileMagicSwapped = 0x50455246494c4532ULL;
inline constexpr uint64_t kFileHeaderSize = 104;  // magic, size, attr_size, 3 sections, 256-bit features
inline constexpr uint64_t kPipeHeaderSize = 16;   // magic, size
inline constexpr uint64_t kRecordHeaderSize = 8;  // struct perf_event_header
inline constexpr uint64_t kAuxtraceRecordSize = 48;  // header + size, offset, reference, idx, tid, cpu, reserved
inline constexpr int kFeatureBits = 256;

// perf's user record types (tools/lib/perf/include/perf/event.h).
enum PerfUserRecordType : uint32_t {
  kRecordHeaderAttr = 64,
  kRecordHeaderEventType = 65,
  kRecordHeaderTracingData = 66,
  kRecordHeaderBuildId = 67,
  kRecordFinishedRound = 68,
  kRecordIdIndex = 69,
  kRecordAuxtraceInfo = 70,
  kRecordAuxtrace = 71,
  kRecordAuxtraceError = 72,
  kRecordThreadMap = 73,
  kRecordCpuMap = 74,
  kRecordStatConfig = 75,
  kRecordStat = 76,
  kRecordStatRound = 77,
  kRecordEventUpdate = 78,
  kRecordTimeConv = 79,
  kRecordHeaderFeature = 80,
  kRecordCompressed = 81,
  kRecordFinishedInit = 82,
};

// Feature bits of the file header (tools/perf/util/header.h, HEADER_*).
enum PerfFeature : int {
  kFeatTracingData = 1,
  kFeatBuildId = 2,
  kFeatHostname = 3,
  kFeatOsRelease = 4,
  kFeatVersion = 5,
  kFeatArch = 6,
  kFeatNrCpus = 7,
  kFeatCpuDesc = 8,
  kFeatCpuId = 9,
  kFeatTotalMem = 10,
  kFeatCmdline = 11,
  kFeatEventDesc = 12,
  kFeatCpuTopology = 13,
  kFeatPmuMappings = 16,
  kFeatGroupDesc = 17,
  kFeatAuxtrace = 18,
};

// PERF_AUXTRACE_INTEL_PT in perf's enum auxtrace_type.
inline constexpr uint32_t kAuxtraceTypeIntelPt = 1;

// perf_record_header_build_id.misc: the build-id length byte is valid.
inline constexpr uint16_t kBuildIdMiscSize = 1u << 15;
inline constexpr uint64_t kBuildIdRecordFixedSize = 8 + 4 + 24;  // header, pid, build_id[24]

// Names used in messages ("PERF_RECORD_MMAP2", "PERF_RECORD_AUXTRACE" ...).
const char* RecordTypeName(uint32_t type);

}  // namespace ptd::perfdata
