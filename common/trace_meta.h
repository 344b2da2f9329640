#pragma once
// meta.json of a trace directory (docs/trace-dir.md): the one place that says how the
// bytes under aux/, sideband/ and images/ are to be interpreted.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/host_info.h"
#include "nlohmann/json_fwd.hpp"

namespace ptd {

// Major changes break readers; minor changes only add fields that old readers ignore.
inline constexpr int kTraceFormatMajor = 1;
inline constexpr int kTraceFormatMinor = 3;  // 1.1: partial, partial_reason, build_ids; 1.2: emulator, time_axis;
                                             // 1.3: archived, archive, namespace_tids, kernel, trigger
inline constexpr char kMetaFileName[] = "meta.json";

enum class TraceMode { kHardware, kEmulated, kImported };
const char* TraceModeName(TraceMode mode);

// Intel PT configuration as recorded. Everything the decoder needs for pt_config.
struct PtSettings {
  int pmu_type = -1;                       // perf PMU type of intel_pt, -1 when emulated
  uint64_t config = 0;                     // perf_event_attr.config as opened
  std::map<std::string, uint64_t> fields;  // named format fields, e.g. {"tsc":1,"mtc_period":3}
  std::string timing;                      // preset: "low", "normal", "high" or "custom"
  bool user_only = true;
  std::string ip_filter;                   // as passed to PERF_EVENT_IOC_SET_FILTER
  std::map<std::string, std::string> caps; // intel_pt/caps/* as read from sysfs
  uint32_t cpuid_0x15_eax = 0;
  uint32_t cpuid_0x15_ebx = 0;
  uint32_t nom_freq = 0;    // max non-turbo ratio (CYC → time)
  uint32_t mtc_freq = 0;    // mtc_period field (MTC → time)
  uint32_t tsc_art_ratio_num = 0;
  uint32_t tsc_art_ratio_den = 0;
  uint64_t psb_period_bytes = 0;  // for the emulator, the PSB spacing it used
  // Member by member (tests compare a parsed meta.json with what was written).
  bool operator==(const PtSettings&) const = default;
};

// perf's TSC → ns conversion (perf_event_mmap_page time_*), applied to PT TSC values.
// ns = time_zero + (tsc >> shift) * mult + (((tsc & mask) * mult) >> shift)
struct TimeConversion {
  uint16_t time_shift = 0;
  uint32_t time_mult = 1;
  uint64_t time_zero = 0;
  bool cap_user_time_zero = false;
  uint64_t TscToNs(uint64_t tsc) const;
  bool operator==(const TimeConversion&) const = default;
};

// One contiguous piece of PT bytes inside a stream file.
struct PtChunk {
  uint64_t file_offset = 0;  // where the bytes start in the stream file
  uint64_t size = 0;
  uint64_t aux_offset = 0;   // position in the AUX stream (monotonic aux_head space)
  uint64_t time_ns = 0;      // when the chunk was taken (perf clock)
  std::string reason;        // "linear", "sigint", "sigusr2", "control", "exit", "trigger", "import"
  bool truncated = false;    // PERF_AUX_FLAG_TRUNCATED: data lost before this chunk ended
  bool partial = false;      // PERF_AUX_FLAG_PARTIAL
  bool collision = false;    // PERF_AUX_FLAG_COLLISION
  bool overwrite = false;    // PERF_AUX_FLAG_OVERWRITE (snapshot ring)
  bool lost_before = false;  // a gap precedes this chunk (non-contiguous with the previous)
  // Member by member (tests compare a parsed meta.json with what was written).
  bool operator==(const PtChunk&) const = default;
};

struct PtStream {
  std::string file;  // relative to the trace directory, e.g. "aux/cpu0.pt"
  int cpu = -1;      // per-CPU stream, or -1
  int tid = -1;      // per-thread stream, or -1
  std::vector<PtChunk> chunks;
  // Member by member (tests compare a parsed meta.json with what was written).
  bool operator==(const PtStream&) const = default;
};

struct SidebandFile {
  std::string file;        // relative, e.g. "sideband/cpu0.data"
  int cpu = -1;
  int tid = -1;
  std::string origin = "kernel";  // "kernel" (DATA ring bytes) or "synthesized" (/proc)
  uint64_t sample_type = 0;       // perf_event_attr.sample_type of the sideband event
  bool sample_id_all = true;
  uint64_t lost_records = 0;      // sum of PERF_RECORD_LOST counts
  // Member by member (tests compare a parsed meta.json with what was written).
  bool operator==(const SidebandFile&) const = default;
};

enum class ImageKind { kFile, kVdso, kMemoryDump };
const char* ImageKindName(ImageKind kind);

struct ImageEntry {
  std::string path;  // relative to the trace directory for dumps, absolute for host files
  std::string name;  // what the process saw, e.g. "[vdso]" or "/usr/lib/.../libc.so.6"
  uint64_t vaddr = 0;
  uint64_t file_offset = 0;
  uint64_t size = 0;
  int pid = -1;      // -1: every process
  ImageKind kind = ImageKind::kFile;
  std::string build_id;  // hex, empty when unknown
  // Member by member (tests compare a parsed meta.json with what was written).
  bool operator==(const ImageEntry&) const = default;
};

// A host file the target mapped, copied into the trace directory (docs/trace-dir.md,
// "images/by-build-id"): decode reads it instead of the path when its build-id matches.
struct ArchivedFile {
  std::string path;      // absolute path as the process saw it
  std::string build_id;  // hex
  std::string file;      // relative to the trace directory
  uint64_t size = 0;     // bytes (a copy of another size is corrupt)
  bool operator==(const ArchivedFile&) const = default;
};

// A kernel module loaded when recording ended (/proc/modules, /sys/module/NAME/notes).
struct KernelModule {
  std::string name;
  uint64_t address = 0, size = 0;  // its core (text) as /proc/modules gives it
  std::string build_id;            // hex, "" when unknown
  bool operator==(const KernelModule&) const = default;
};

// What decoding kernel code needs (record --kernel; docs/trace-dir.md "kernel"). The
// kernel text itself, from /proc/kcore or a vmlinux with the kernel's build-id, is an
// entry of `images` (pid -1).
struct KernelInfo {
  std::string kallsyms;  // relative file: a copy of /proc/kallsyms; "" when not captured
  std::string build_id;  // the running kernel's (/sys/kernel/notes), hex
  std::vector<KernelModule> modules;
  bool operator==(const KernelInfo&) const = default;
};

// The call that fired the recording's trigger (record --trigger, --trigger-slower-than),
// on the trace's time axis, so decode can place its window around it.
struct TriggerPoint {
  std::string symbol;
  uint64_t slower_than_ns = 0;  // 0: fired on an entry
  uint64_t hit = 0;             // which hit of the symbol (1-based)
  int pid = -1;
  int tid = -1;
  uint64_t entry_ns = 0;
  uint64_t return_ns = 0;       // 0: fired on the entry
  // --trim: the streams keep only the trace from trimmed_from_ns on (0: not trimmed).
  uint64_t trimmed_from_ns = 0;
  bool operator==(const TriggerPoint&) const = default;
};

struct TraceMeta {
  int format_major = kTraceFormatMajor;
  int format_minor = kTraceFormatMinor;
  std::string tool_version;
  HostInfo host;
  TraceMode mode = TraceMode::kHardware;
  // Emulated traces: which emulator wrote them ("ptrace", "valgrind"); empty otherwise.
  std::string emulator;
  // What TSC packets count: "tsc" (hardware), "wall" (CLOCK_MONOTONIC ns) or "virtual"
  // (retired instructions, one per ns); empty in traces written before 1.2.
  std::string time_axis;
  // Emulated traces: picoseconds per instruction of the target's CPU work (between system
  // calls) under the emulator, and of a simple loop run natively when recording: how much
  // the emulator slows CPU work on the wall clock (0: not measured).
  uint64_t emulated_ps_per_instruction = 0;
  uint64_t native_ps_per_instruction = 0;
  PtSettings pt;
  TimeConversion time;
  std::vector<std::string> command;
  std::vector<int> pids;
  std::string per = "thread";  // "thread" or "cpu": how streams are split
  std::vector<PtStream> streams;
  std::vector<SidebandFile> sideband;
  std::vector<ImageEntry> images;
  // Build-ids of the host files the target mapped, read when recording ended (absolute
  // path -> hex): decode warns when a file has changed since.
  std::map<std::string, std::string> build_ids;
  // The recorder archived the mapped files (false: --no-archive, imports, older traces).
  bool archived = false;
  std::vector<ArchivedFile> archive;
  // Threads in another pid namespace (containers): host tid -> the tid there.
  std::map<int, int> namespace_tids;
  KernelInfo kernel;
  std::string end_reason;          // "exit", "sigint", "duration", "sigterm", "target_killed" ...
  std::vector<std::string> notes;  // what happened while recording, for `info`
  // The recording stopped on an error (disk full ...): the files hold what was written
  // before it and the chunks describe only bytes that are on disk.
  bool partial = false;
  std::string partial_reason;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::optional<TriggerPoint> trigger;  // the first firing, when a trigger fired
  // Member by member (tests compare a parsed meta.json with what was written).
  bool operator==(const TraceMeta&) const = default;
};

// `source` names the file in error messages.
absl::StatusOr<TraceMeta> ParseTraceMeta(const std::string& json_text,
                                         const std::string& source = kMetaFileName);
std::string SerializeTraceMeta(const TraceMeta& meta);
// What SerializeTraceMeta writes, as JSON; `info --json` shows its account of the run.
nlohmann::ordered_json TraceMetaToJson(const TraceMeta& meta);
// One chunk as meta.json holds it; `info --json` shows the same object.
nlohmann::ordered_json PtChunkToJson(const PtChunk& chunk);
// meta.json's "trigger" object; `info --json` shows the same.
nlohmann::ordered_json TriggerPointToJson(const TriggerPoint& trigger);

absl::StatusOr<TraceMeta> ReadTraceMeta(const std::string& trace_dir);
absl::Status WriteTraceMeta(const std::string& trace_dir, const TraceMeta& meta);

}  // namespace ptd
