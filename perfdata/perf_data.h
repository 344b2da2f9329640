#pragma once
// What a perf.data holds, as plain data: the PerfDataReader fills it, the importer and
// tests read it. Records are kept as offsets into `bytes` (no copies of payloads).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "perfdata/intel_pt_info.h"

namespace ptd::perfdata {

struct PerfAttr {
  std::vector<uint8_t> raw;  // perf_event_attr as stored (attr.size bytes)
  uint32_t type = 0;
  uint64_t config = 0;
  uint64_t sample_type = 0;
  uint64_t read_format = 0;
  uint64_t flags = 0;  // the bitfield word (disabled, inherit, ..., sample_id_all ...)
  bool sample_id_all = false;
  bool exclude_kernel = false;
  bool context_switch = false;
  std::vector<uint64_t> ids;
  std::string name;  // from HEADER_EVENT_DESC when present
};

struct BuildIdEntry {
  int32_t pid = -1;
  uint16_t misc = 0;  // cpumode of the DSO (kernel/user)
  std::string build_id;  // lowercase hex
  std::string filename;
};

struct PerfFeatures {
  std::string hostname;
  std::string os_release;
  std::string perf_version;
  std::string arch;
  std::string cpu_desc;
  std::string cpuid;  // "GenuineIntel,6,78,3"
  uint32_t nr_cpus_available = 0;
  uint32_t nr_cpus_online = 0;
  uint64_t total_mem_kb = 0;
  std::vector<std::string> cmdline;
  std::vector<BuildIdEntry> build_ids;
  std::map<uint32_t, std::string> pmu_mappings;  // PMU type -> name
  std::vector<int> present;  // feature bits seen (file header bits or HEADER_FEATURE records)
};

// One PERF_RECORD_AUXTRACE: `size` bytes of PT data for (idx, cpu, tid) at `offset` in
// that AUX area's byte stream; the payload follows the record in the file.
struct AuxtraceBuffer {
  uint64_t record_offset = 0;   // file offset of the record
  uint64_t payload_offset = 0;  // file offset of the payload
  uint64_t size = 0;
  uint64_t offset = 0;
  uint64_t reference = 0;
  uint32_t idx = 0;
  int32_t tid = -1;
  int32_t cpu = -1;
};

// A record of the data section other than AUXTRACE payloads (kernel sideband,
// samples and perf's own records).
struct RecordRef {
  uint64_t file_offset = 0;
  uint32_t type = 0;
  uint16_t misc = 0;
  uint16_t size = 0;
  int attr_index = -1;  // which attr's sample_type describes its sample_id, -1 unknown
};

struct TimeConv {
  uint64_t time_shift = 0;
  uint64_t time_mult = 0;
  uint64_t time_zero = 0;
};

struct PerfData {
  std::string source;        // file name for messages
  std::vector<uint8_t> bytes;
  bool pipe_mode = false;
  uint64_t data_offset = 0;  // file mode: data section
  uint64_t data_size = 0;
  std::vector<PerfAttr> attrs;
  PerfFeatures features;
  std::optional<uint32_t> auxtrace_type;  // AUXTRACE_INFO type (1 = Intel PT)
  std::optional<IntelPtInfo> intel_pt;
  std::optional<TimeConv> time_conv;
  std::vector<AuxtraceBuffer> aux_buffers;
  std::vector<RecordRef> records;
  std::map<uint32_t, uint64_t> record_counts;  // by type, including AUXTRACE and header records
  uint64_t auxtrace_errors = 0;
  uint64_t lost_records = 0;  // sum of PERF_RECORD_LOST.lost
};

}  // namespace ptd::perfdata
