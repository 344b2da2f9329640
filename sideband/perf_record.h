#pragma once
// Typed perf records as the kernel writes them into a DATA ring (include/uapi/linux/
// perf_event.h). Plain structs; RecordReader fills them, RecordBuilder encodes them.

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace ptd {

// perf_event_header.type values (enum perf_event_type). Values the kernel may add later
// are still accepted: they become OtherRecord and are skipped by size.
enum PerfRecordType : uint32_t {
  kPerfRecordMmap = 1,
  kPerfRecordLost = 2,
  kPerfRecordComm = 3,
  kPerfRecordExit = 4,
  kPerfRecordThrottle = 5,
  kPerfRecordUnthrottle = 6,
  kPerfRecordFork = 7,
  kPerfRecordRead = 8,
  kPerfRecordSample = 9,
  kPerfRecordMmap2 = 10,
  kPerfRecordAux = 11,
  kPerfRecordItraceStart = 12,
  kPerfRecordLostSamples = 13,
  kPerfRecordSwitch = 14,
  kPerfRecordSwitchCpuWide = 15,
  kPerfRecordNamespaces = 16,
  kPerfRecordKsymbol = 17,
  kPerfRecordBpfEvent = 18,
  kPerfRecordCgroup = 19,
  kPerfRecordTextPoke = 20,
  kPerfRecordAuxOutputHwId = 21,
  // perf tool records (perf.data only) start here; the kernel never writes them.
  kPerfRecordUserTypeStart = 64,
};

// "MMAP2", "SWITCH_CPU_WIDE", ... or "type 42" for unknown values.
std::string PerfRecordTypeName(uint32_t type);

// perf_event_header.misc bits we interpret.
inline constexpr uint16_t kPerfMiscCpumodeMask = 7;
inline constexpr uint16_t kPerfMiscKernel = 1;
inline constexpr uint16_t kPerfMiscUser = 2;
inline constexpr uint16_t kPerfMiscMmapData = 1 << 13;        // MMAP*: non-executable map
inline constexpr uint16_t kPerfMiscCommExec = 1 << 13;        // COMM: name changed by exec
inline constexpr uint16_t kPerfMiscSwitchOut = 1 << 13;       // SWITCH*: out, else in
inline constexpr uint16_t kPerfMiscSwitchOutPreempt = 1 << 14;  // SWITCH* out: preempted
inline constexpr uint16_t kPerfMiscMmapBuildId = 1 << 14;     // MMAP2 carries a build-id

// perf_event_attr.sample_type bits that shape the sample_id trailer.
inline constexpr uint64_t kPerfSampleTid = 1u << 1;
inline constexpr uint64_t kPerfSampleTime = 1u << 2;
inline constexpr uint64_t kPerfSampleId = 1u << 6;
inline constexpr uint64_t kPerfSampleCpu = 1u << 7;
inline constexpr uint64_t kPerfSampleStreamId = 1u << 9;
inline constexpr uint64_t kPerfSampleIdentifier = 1u << 16;
// What the sideband event of a recording uses (docs/perf-abi notes).
inline constexpr uint64_t kSidebandSampleType =
    kPerfSampleTid | kPerfSampleTime | kPerfSampleCpu | kPerfSampleIdentifier;

// PERF_RECORD_AUX flags.
inline constexpr uint64_t kPerfAuxFlagTruncated = 0x01;
inline constexpr uint64_t kPerfAuxFlagOverwrite = 0x02;
inline constexpr uint64_t kPerfAuxFlagPartial = 0x04;
inline constexpr uint64_t kPerfAuxFlagCollision = 0x08;

// The sample_id trailer (sample_id_all), in the order the fields are present.
struct SampleId {
  bool has_tid = false;
  bool has_time = false;
  bool has_id = false;  // PERF_SAMPLE_ID or PERF_SAMPLE_IDENTIFIER
  bool has_stream_id = false;
  bool has_cpu = false;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time = 0;
  uint64_t id = 0;
  uint64_t stream_id = 0;
  uint32_t cpu = 0;
  bool operator==(const SampleId&) const = default;
};

// A record struct's header type, and the fixed-size fields that start its body in the
// order the kernel writes them: RecordReader reads and RecordBuilder writes that one list.
// What follows them (strings, MMAP2's build-id or inode, counted arrays) and the flags
// in the header's misc bits each handles per type.
template <typename... Fields>  // pointers to the struct's members
struct RecordLayout {
  constexpr explicit RecordLayout(uint32_t type, Fields... fields)
      : type(type), fixed_fields(fields...) {}
  constexpr RecordLayout WithType(uint32_t other) const {
    RecordLayout layout = *this;
    layout.type = other;
    return layout;
  }
  uint32_t type;
  std::tuple<Fields...> fixed_fields;
};

struct MmapRecord {  // PERF_RECORD_MMAP
  uint32_t pid = 0, tid = 0;
  uint64_t addr = 0, len = 0, pgoff = 0;
  std::string filename;
  bool data = false;  // misc MMAP_DATA: not executable
  static constexpr RecordLayout kLayout{kPerfRecordMmap, &MmapRecord::pid, &MmapRecord::tid,
                                        &MmapRecord::addr, &MmapRecord::len, &MmapRecord::pgoff};
  bool operator==(const MmapRecord&) const = default;
};

// PERF_RECORD_MMAP2: MMAP's fields (the fixed ones first, the filename last) with device
// and inode or a build-id, protection and flags between them.
struct Mmap2Record : MmapRecord {
  static constexpr auto kLayout = MmapRecord::kLayout.WithType(kPerfRecordMmap2);
  // Either device/inode (has_build_id false) or a build-id (misc MMAP_BUILD_ID).
  uint32_t maj = 0, min = 0;
  uint64_t ino = 0, ino_generation = 0;
  bool has_build_id = false;
  uint8_t build_id_size = 0;
  std::array<uint8_t, 20> build_id{};
  uint32_t prot = 0, flags = 0;  // PROT_*, MAP_*
  bool operator==(const Mmap2Record&) const = default;
};

struct CommRecord {  // PERF_RECORD_COMM
  uint32_t pid = 0, tid = 0;
  std::string comm;
  bool exec = false;  // misc COMM_EXEC: the process exec'd
  static constexpr RecordLayout kLayout{kPerfRecordComm, &CommRecord::pid, &CommRecord::tid};
  bool operator==(const CommRecord&) const = default;
};

// PERF_RECORD_FORK and PERF_RECORD_EXIT share a layout. FORK with pid == ppid is a new
// thread in the same process; EXIT with pid == tid ends the process's main thread.
template <uint32_t Type>
struct TaskRecord {
  uint32_t pid = 0, ppid = 0, tid = 0, ptid = 0;
  uint64_t time = 0;
  static constexpr RecordLayout kLayout{Type, &TaskRecord::pid, &TaskRecord::ppid, &TaskRecord::tid,
                                        &TaskRecord::ptid, &TaskRecord::time};
  bool operator==(const TaskRecord&) const = default;
};
using ForkRecord = TaskRecord<kPerfRecordFork>;
using ExitRecord = TaskRecord<kPerfRecordExit>;

struct SwitchRecord {  // PERF_RECORD_SWITCH (thread context; who is in sample_id)
  static constexpr RecordLayout kLayout{kPerfRecordSwitch};  // only misc bits
  bool out = false;
  bool preempt = false;  // out only: the task was still runnable
  bool operator==(const SwitchRecord&) const = default;
};

struct SwitchCpuWideRecord {  // PERF_RECORD_SWITCH_CPU_WIDE
  // Out: the task switched to. In: the task switched from.
  uint32_t next_prev_pid = 0, next_prev_tid = 0;
  bool out = false;
  bool preempt = false;
  static constexpr RecordLayout kLayout{kPerfRecordSwitchCpuWide,
                                        &SwitchCpuWideRecord::next_prev_pid,
                                        &SwitchCpuWideRecord::next_prev_tid};
  bool operator==(const SwitchCpuWideRecord&) const = default;
};

struct ItraceStartRecord {  // PERF_RECORD_ITRACE_START
  uint32_t pid = 0, tid = 0;
  static constexpr RecordLayout kLayout{kPerfRecordItraceStart, &ItraceStartRecord::pid,
                                        &ItraceStartRecord::tid};
  bool operator==(const ItraceStartRecord&) const = default;
};

struct AuxRecord {  // PERF_RECORD_AUX
  uint64_t aux_offset = 0, aux_size = 0, flags = 0;
  static constexpr RecordLayout kLayout{kPerfRecordAux, &AuxRecord::aux_offset,
                                        &AuxRecord::aux_size, &AuxRecord::flags};
  bool truncated() const { return flags & kPerfAuxFlagTruncated; }
  bool overwrite() const { return flags & kPerfAuxFlagOverwrite; }
  bool partial() const { return flags & kPerfAuxFlagPartial; }
  bool collision() const { return flags & kPerfAuxFlagCollision; }
  bool operator==(const AuxRecord&) const = default;
};

struct LostRecord {  // PERF_RECORD_LOST
  uint64_t id = 0, lost = 0;
  static constexpr RecordLayout kLayout{kPerfRecordLost, &LostRecord::id, &LostRecord::lost};
  bool operator==(const LostRecord&) const = default;
};

struct LostSamplesRecord {  // PERF_RECORD_LOST_SAMPLES
  uint64_t lost = 0;
  static constexpr RecordLayout kLayout{kPerfRecordLostSamples, &LostSamplesRecord::lost};
  bool operator==(const LostSamplesRecord&) const = default;
};

struct ThrottleRecord {  // PERF_RECORD_THROTTLE / UNTHROTTLE
  uint64_t time = 0, id = 0, stream_id = 0;
  bool unthrottle = false;
  // UNTHROTTLE when unthrottle
  static constexpr RecordLayout kLayout{kPerfRecordThrottle, &ThrottleRecord::time,
                                        &ThrottleRecord::id, &ThrottleRecord::stream_id};
  bool operator==(const ThrottleRecord&) const = default;
};

struct NamespacesRecord {  // PERF_RECORD_NAMESPACES
  uint32_t pid = 0, tid = 0;
  std::vector<std::pair<uint64_t, uint64_t>> namespaces;  // {dev, inode}
  static constexpr RecordLayout kLayout{kPerfRecordNamespaces, &NamespacesRecord::pid,
                                        &NamespacesRecord::tid};
  bool operator==(const NamespacesRecord&) const = default;
};

struct KsymbolRecord {  // PERF_RECORD_KSYMBOL
  uint64_t addr = 0;
  uint32_t len = 0;
  uint16_t ksym_type = 0, flags = 0;
  std::string name;
  static constexpr RecordLayout kLayout{kPerfRecordKsymbol, &KsymbolRecord::addr,
                                        &KsymbolRecord::len, &KsymbolRecord::ksym_type,
                                        &KsymbolRecord::flags};
  bool operator==(const KsymbolRecord&) const = default;
};

struct BpfEventRecord {  // PERF_RECORD_BPF_EVENT
  uint16_t type = 0, flags = 0;
  uint32_t id = 0;
  std::array<uint8_t, 8> tag{};
  static constexpr RecordLayout kLayout{kPerfRecordBpfEvent, &BpfEventRecord::type,
                                        &BpfEventRecord::flags, &BpfEventRecord::id,
                                        &BpfEventRecord::tag};
  bool operator==(const BpfEventRecord&) const = default;
};

struct CgroupRecord {  // PERF_RECORD_CGROUP
  uint64_t id = 0;
  std::string path;
  static constexpr RecordLayout kLayout{kPerfRecordCgroup, &CgroupRecord::id};
  bool operator==(const CgroupRecord&) const = default;
};

struct TextPokeRecord {  // PERF_RECORD_TEXT_POKE
  uint64_t addr = 0;
  std::vector<uint8_t> old_bytes, new_bytes;
  static constexpr RecordLayout kLayout{kPerfRecordTextPoke, &TextPokeRecord::addr};
  bool operator==(const TextPokeRecord&) const = default;
};

struct AuxOutputHwIdRecord {  // PERF_RECORD_AUX_OUTPUT_HW_ID
  uint64_t hw_id = 0;
  static constexpr RecordLayout kLayout{kPerfRecordAuxOutputHwId, &AuxOutputHwIdRecord::hw_id};
  bool operator==(const AuxOutputHwIdRecord&) const = default;
};

// Any other type (SAMPLE, READ, perf tool types, future types): the bytes after the
// header, and before the sample_id trailer when the type has one.
struct OtherRecord {
  static constexpr RecordLayout kLayout{0};  // type 0: PerfRecord::type says which
  std::vector<uint8_t> payload;
  bool operator==(const OtherRecord&) const = default;
};

using PerfRecordBody =
    std::variant<OtherRecord, MmapRecord, Mmap2Record, CommRecord, ForkRecord, ExitRecord,
                 SwitchRecord, SwitchCpuWideRecord, ItraceStartRecord, AuxRecord,
                 LostRecord, LostSamplesRecord, ThrottleRecord, NamespacesRecord,
                 KsymbolRecord, BpfEventRecord, CgroupRecord, TextPokeRecord,
                 AuxOutputHwIdRecord>;

struct PerfRecord {
  uint32_t type = 0;     // perf_event_header.type
  uint16_t misc = 0;     // perf_event_header.misc as read (flags also decoded in body)
  uint16_t size = 0;     // perf_event_header.size as read
  uint64_t offset = 0;   // byte offset of the header in its source
  SampleId sample_id;    // trailer fields (all has_* false without sample_id_all)
  PerfRecordBody body;
  bool operator==(const PerfRecord&) const = default;
};

// Calls visit(field) for each of the record's fixed fields (kLayout) in order while it
// returns true; false when one returned false.
template <typename Record, typename Visit>
bool ForEachFixedField(Record& record, Visit visit) {
  return std::apply([&](auto... member) { return (visit(record.*member) && ...); },
                    std::remove_const_t<Record>::kLayout.fixed_fields);
}

// True for kernel record types that carry the sample_id trailer when sample_id_all is
// set (every kernel type except SAMPLE).
bool RecordHasSampleIdTrailer(uint32_t type);
// Bytes of the sample_id trailer for `sample_type`.
size_t SampleIdSize(uint64_t sample_type);

// The sample_id trailer of SampleIdSize(sample_type) bytes at `trailer`.
SampleId ParseSampleId(const uint8_t* trailer, uint64_t sample_type);

// Calls visit(has, field) for each field of the sample_id trailer that `sample_type` asks
// for, in the kernel's order; `has` is the SampleId flag of the field's group. The one
// description of the trailer that RecordReader reads and RecordBuilder writes.
template <typename Id, typename Visit>  // Id: SampleId or const SampleId
void ForEachSampleIdField(uint64_t sample_type, Id& id, Visit visit) {
  uint32_t reserved = 0;  // CPU is { u32 cpu, res; }
  if (sample_type & kPerfSampleTid) visit(id.has_tid, id.pid), visit(id.has_tid, id.tid);
  if (sample_type & kPerfSampleTime) visit(id.has_time, id.time);
  if (sample_type & kPerfSampleId) visit(id.has_id, id.id);
  if (sample_type & kPerfSampleStreamId) visit(id.has_stream_id, id.stream_id);
  if (sample_type & kPerfSampleCpu) visit(id.has_cpu, id.cpu), visit(id.has_cpu, reserved);
  if (sample_type & kPerfSampleIdentifier) visit(id.has_id, id.id);
}

}  // namespace ptd
