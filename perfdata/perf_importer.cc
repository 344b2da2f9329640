#include "perfdata/perf_importer.h"

#include <linux/perf_event.h>
#include <limits.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <cstring>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "perfdata/build_id_cache.h"
#include "perfdata/executable_mappings.h"
#include "perfdata/intel_pt_info.h"
#include "perfdata/perf_format.h"
#include "perfdata/sample_id.h"
#include "ptd/version.h"

namespace ptd::perfdata {
namespace {

const PerfAttr* FindPtAttr(const PerfData& data) {
  if (!data.intel_pt) return nullptr;
  for (const PerfAttr& attr : data.attrs) {
    if (attr.type == (*data.intel_pt)[kWordPmuType]) return &attr;
  }
  return nullptr;
}

CpuId ParsePerfCpuid(const std::string& cpuid) {
  // x86 perf writes "GenuineIntel,6,78,3" (vendor, family, model, stepping).
  CpuId cpu;
  std::vector<std::string> parts = absl::StrSplit(cpuid, ',');
  if (parts.empty() || cpuid.empty()) {
    cpu.vendor = "unknown";
    return cpu;
  }
  cpu.vendor = parts[0] == "GenuineIntel" ? "intel" : parts[0] == "AuthenticAMD" ? "amd" : "unknown";
  if (parts.size() >= 4) {
    (void)absl::SimpleAtoi(parts[1], &cpu.family);
    (void)absl::SimpleAtoi(parts[2], &cpu.model);
    (void)absl::SimpleAtoi(parts[3], &cpu.stepping);
  }
  return cpu;
}

uint64_t RecordSampleType(const PerfData& data, const RecordRef& rec) {
  const int index = rec.attr_index >= 0 ? rec.attr_index : 0;
  return data.attrs.empty() ? 0 : data.attrs[index].sample_type;
}

bool RecordSampleIdAll(const PerfData& data, const RecordRef& rec) {
  const int index = rec.attr_index >= 0 ? rec.attr_index : 0;
  return !data.attrs.empty() && data.attrs[index].sample_id_all;
}

absl::Span<const uint8_t> RecordBytes(const PerfData& data, const RecordRef& rec) {
  return absl::Span<const uint8_t>(data.bytes).subspan(rec.file_offset, rec.size);
}

SampleId RecordSampleId(const PerfData& data, const RecordRef& rec) {
  SampleId id;
  if (RecordSampleIdAll(data, rec)) ParseSampleIdTrailer(RecordBytes(data, rec), RecordSampleType(data, rec), &id);
  return id;
}

std::string StreamName(const AuxtraceBuffer& b, bool per_cpu) {
  if (per_cpu && b.cpu >= 0) return absl::StrCat("cpu", b.cpu);
  if (b.tid >= 0) return absl::StrCat("tid", b.tid);
  return absl::StrCat("idx", b.idx);
}

// PERF_RECORD_AUX facts for one AUX area, to carry flags and times onto the chunks.
struct AuxEvent {
  uint64_t aux_offset = 0, aux_size = 0, flags = 0, time = 0;
  int cpu = -1, tid = -1;
};

std::vector<AuxEvent> CollectAuxEvents(const PerfData& data) {
  std::vector<AuxEvent> out;
  for (const RecordRef& rec : data.records) {
    if (rec.type != PERF_RECORD_AUX || rec.size < 32) continue;
    auto bytes = RecordBytes(data, rec);
    AuxEvent e;
    std::memcpy(&e.aux_offset, bytes.data() + 8, 8);
    std::memcpy(&e.aux_size, bytes.data() + 16, 8);
    std::memcpy(&e.flags, bytes.data() + 24, 8);
    SampleId id = RecordSampleId(data, rec);
    e.time = id.time;
    e.cpu = id.has_cpu ? static_cast<int>(id.cpu) : -1;
    e.tid = id.has_tid ? static_cast<int>(id.tid) : -1;
    out.push_back(e);
  }
  return out;
}

// meta.json paths that are not absolute are read relative to the trace directory, so a
// binary found through a relative --buildid-dir must be stored absolute.
std::string AbsolutePath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return absl::StrCat(cwd, "/", path);
}

}  // namespace

absl::StatusOr<TraceMeta> PerfDataToMeta(const PerfData& data) {
  if (!data.intel_pt) {
    return absl::FailedPreconditionError(absl::StrCat(
        data.source, ": no Intel PT AUXTRACE_INFO record (was it recorded with -e intel_pt//?)"));
  }
  const IntelPtInfo& info = *data.intel_pt;
  const PerfAttr* pt_attr = FindPtAttr(data);
  if (pt_attr == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: AUXTRACE_INFO names PMU type %u but no event has that type", data.source, info[kWordPmuType]));
  }
  TraceMeta meta;
  meta.tool_version = kToolVersion;
  meta.mode = TraceMode::kImported;
  meta.host.cpu = ParsePerfCpuid(data.features.cpuid);
  meta.host.kernel_release = data.features.os_release;
  meta.host.hostname = data.features.hostname;

  PtSettings& pt = meta.pt;
  pt.pmu_type = static_cast<int>(info[kWordPmuType]);
  pt.config = pt_attr->config;
  pt.fields["pt"] = pt_attr->config & 1;
  pt.fields["branch"] = (pt_attr->config & kBranchEnBit) ? 1 : 0;
  pt.fields["tsc"] = (pt_attr->config & info[kWordTscBit]) ? 1 : 0;
  pt.fields["noretcomp"] = (pt_attr->config & info[kWordNoRetCompBit]) ? 1 : 0;
  pt.fields["mtc"] = (pt_attr->config & info[kWordMtcBit]) ? 1 : 0;
  pt.fields["mtc_period"] = ConfigField(pt_attr->config, info[kWordMtcFreqBits]);
  pt.fields["cyc"] = (pt_attr->config & info[kWordCycBit]) ? 1 : 0;
  pt.fields["cyc_thresh"] = ConfigField(pt_attr->config, kCycThreshMask);
  pt.fields["psb_period"] = ConfigField(pt_attr->config, kPsbPeriodMask);
  pt.timing = "custom";
  pt.user_only = pt_attr->exclude_kernel;
  pt.ip_filter = info.filter;
  pt.cpuid_0x15_eax = static_cast<uint32_t>(info[kWordTscCtcRatioD]);
  pt.cpuid_0x15_ebx = static_cast<uint32_t>(info[kWordTscCtcRatioN]);
  pt.tsc_art_ratio_num = static_cast<uint32_t>(info[kWordTscCtcRatioN]);
  pt.tsc_art_ratio_den = static_cast<uint32_t>(info[kWordTscCtcRatioD]);
  pt.nom_freq = static_cast<uint32_t>(info[kWordMaxNonTurboRatio]);
  pt.mtc_freq = static_cast<uint32_t>(pt.fields["mtc_period"]);

  meta.time.time_shift = static_cast<uint16_t>(info[kWordTimeShift]);
  meta.time.time_mult = static_cast<uint32_t>(info[kWordTimeMult]);
  meta.time.time_zero = info[kWordTimeZero];
  meta.time.cap_user_time_zero = info[kWordCapUserTimeZero] != 0;
  meta.per = info[kWordPerCpuMmaps] ? "cpu" : "thread";
  meta.end_reason = "imported";

  auto dashdash = std::find(data.features.cmdline.begin(), data.features.cmdline.end(), "--");
  if (dashdash != data.features.cmdline.end()) meta.command.assign(dashdash + 1, data.features.cmdline.end());

  meta.notes.push_back(absl::StrFormat("imported from %s (%s mode, perf %s): %s", data.source,
                                       data.pipe_mode ? "pipe" : "file",
                                       data.features.perf_version.empty() ? "version unknown" : data.features.perf_version,
                                       absl::StrJoin(data.features.cmdline, " ")));
  meta.notes.push_back(absl::StrFormat(
      "perf AUXTRACE_INFO: have_sched_switch=%u snapshot_mode=%u per_cpu_mmaps=%u tsc_bit=0x%x "
      "mtc_bit=0x%x mtc_freq_bits=0x%x cyc_bit=0x%x noretcomp_bit=0x%x",
      info[kWordHaveSchedSwitch], info[kWordSnapshotMode], info[kWordPerCpuMmaps], info[kWordTscBit],
      info[kWordMtcBit], info[kWordMtcFreqBits], info[kWordCycBit], info[kWordNoRetCompBit]));
  if (!data.features.cpu_desc.empty()) meta.notes.push_back("recorded on " + data.features.cpu_desc);
  auto samples = data.record_counts.find(PERF_RECORD_SAMPLE);
  if (samples != data.record_counts.end()) {
    meta.notes.push_back(absl::StrFormat("%u PERF_RECORD_SAMPLE records (other events' samples) not imported",
                                         samples->second));
  }
  if (data.auxtrace_errors > 0) {
    meta.notes.push_back(absl::StrFormat("%u PERF_RECORD_AUXTRACE_ERROR records in the perf.data", data.auxtrace_errors));
  }

  uint64_t first = UINT64_MAX, last = 0;
  for (const RecordRef& rec : data.records) {
    if (rec.type == PERF_RECORD_SAMPLE) continue;
    SampleId id = RecordSampleId(data, rec);
    if (!id.has_time || id.time == 0) continue;
    first = std::min(first, id.time);
    last = std::max(last, id.time);
  }
  if (first <= last) {
    meta.start_ns = first;
    meta.end_ns = last;
  }
  return meta;
}

absl::StatusOr<PerfImportResult> ImportPerfData(const PerfData& data, const PerfImportOptions& options) {
  absl::StatusOr<TraceMeta> meta_or = PerfDataToMeta(data);
  if (!meta_or.ok()) return meta_or.status();
  PerfImportResult result;
  TraceMeta& meta = result.meta;
  meta = *std::move(meta_or);
  absl::StatusOr<TraceDirWriter> writer = TraceDirWriter::Create(options.out_dir, options.force);
  if (!writer.ok()) return writer.status();
  for (const char* sub : {kAuxSubdir, kSidebandSubdir}) {
    absl::Status st = MakeDirs(writer->FilePath(sub));
    if (!st.ok()) return st;
  }

  // PT streams: one file per AUX area, one chunk per AUXTRACE buffer.
  const bool per_cpu = meta.per == "cpu";
  const std::vector<AuxEvent> aux_events = CollectAuxEvents(data);
  std::vector<std::string> stream_bytes;  // by stream index
  std::map<std::string, size_t> stream_index;
  uint64_t copied = 0;
  for (const AuxtraceBuffer& b : data.aux_buffers) {
    const std::string name = StreamName(b, per_cpu);
    auto [it, inserted] = stream_index.try_emplace(name, meta.streams.size());
    if (inserted) {
      PtStream s;
      s.file = absl::StrCat(kAuxSubdir, "/", name, ".pt");
      s.cpu = per_cpu ? b.cpu : -1;
      s.tid = per_cpu ? -1 : b.tid;
      meta.streams.push_back(s);
      stream_bytes.emplace_back();
    }
    PtStream& stream = meta.streams[it->second];
    std::string& bytes = stream_bytes[it->second];
    PtChunk chunk;
    chunk.file_offset = bytes.size();
    chunk.size = b.size;
    chunk.aux_offset = b.offset;
    chunk.reason = "import";
    if (!stream.chunks.empty()) {
      const PtChunk& prev = stream.chunks.back();
      chunk.lost_before = b.offset > prev.aux_offset + prev.size;
    }
    // Flags and time of the PERF_RECORD_AUX records that describe these bytes.
    for (const AuxEvent& e : aux_events) {
      const bool same_area = per_cpu ? e.cpu == b.cpu : e.tid == b.tid;
      if (!same_area || e.aux_offset < b.offset || e.aux_offset >= b.offset + b.size) continue;
      chunk.truncated |= (e.flags & PERF_AUX_FLAG_TRUNCATED) != 0;
      chunk.overwrite |= (e.flags & PERF_AUX_FLAG_OVERWRITE) != 0;
      chunk.partial |= (e.flags & PERF_AUX_FLAG_PARTIAL) != 0;
      chunk.collision |= (e.flags & PERF_AUX_FLAG_COLLISION) != 0;
      chunk.time_ns = std::max(chunk.time_ns, e.time);
    }
    bytes.append(reinterpret_cast<const char*>(data.bytes.data() + b.payload_offset), b.size);
    stream.chunks.push_back(chunk);
    copied += b.size;
    if (options.progress) options.progress(copied);
  }
  for (size_t i = 0; i < meta.streams.size(); ++i) {
    absl::Status st = WriteFileAtomic(writer->FilePath(meta.streams[i].file), stream_bytes[i]);
    if (!st.ok()) return st;
  }

  // Sideband: kernel records grouped by the layout of their sample_id trailer.
  std::map<std::pair<uint64_t, bool>, std::vector<const RecordRef*>> groups;
  for (const RecordRef& rec : data.records) {
    if (rec.type == PERF_RECORD_SAMPLE) continue;
    groups[{RecordSampleType(data, rec), RecordSampleIdAll(data, rec)}].push_back(&rec);
  }
  for (auto& [key, recs] : groups) {
    // Per-CPU rings are flushed in rounds, so file order is not time order.
    std::vector<std::pair<uint64_t, const RecordRef*>> timed;
    for (const RecordRef* rec : recs) timed.emplace_back(RecordSampleId(data, *rec).time, rec);
    std::stable_sort(timed.begin(), timed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    SidebandFile file;
    file.file = absl::StrFormat("%s/perf.%d.data", kSidebandSubdir, meta.sideband.size());
    file.origin = "kernel";
    file.sample_type = key.first;
    file.sample_id_all = key.second;
    std::string bytes;
    for (const auto& [time, rec] : timed) {
      auto span = RecordBytes(data, *rec);
      bytes.append(reinterpret_cast<const char*>(span.data()), span.size());
      if (rec->type == PERF_RECORD_LOST && rec->size >= 24) {
        uint64_t lost;
        std::memcpy(&lost, span.data() + 16, 8);
        file.lost_records += lost;
      }
    }
    absl::Status st = WriteFileAtomic(writer->FilePath(file.file), bytes);
    if (!st.ok()) return st;
    meta.sideband.push_back(file);
  }

  // Images: every executable mapping, at its recorded path or in the build-id cache.
  std::map<std::string, std::string> build_ids;
  for (const BuildIdEntry& e : data.features.build_ids) build_ids[e.filename] = e.build_id;
  BuildIdCache cache(options.buildid_dirs);
  std::set<std::string> missing;
  std::set<std::tuple<std::string, uint64_t, int>> seen;
  for (const RecordRef& rec : data.records) {
    if (rec.type != PERF_RECORD_MMAP && rec.type != PERF_RECORD_MMAP2) continue;
    std::optional<ExecutableMapping> mapping = ExecutableMappingOf(RecordBytes(data, rec));
    if (!mapping) continue;
    const std::string& name = mapping->name;
    const int32_t pid = mapping->pid;
    const uint64_t addr = mapping->vaddr, len = mapping->size, pgoff = mapping->file_offset;
    if (name.empty() || name.rfind("//anon", 0) == 0 || name == "[stack]" || name == "[heap]" ||
        name.rfind("/memfd:", 0) == 0 || name == "[vsyscall]") {
      continue;
    }
    if (!seen.insert({name, addr, pid}).second) continue;
    std::string build_id = mapping->build_id;
    if (auto it = build_ids.find(name); build_id.empty() && it != build_ids.end()) build_id = it->second;
    ImageEntry image{"", name, addr, pgoff, len, pid,
                     name.rfind("[vdso", 0) == 0 ? ImageKind::kVdso : ImageKind::kFile, build_id};
    // The cache copy is the exact binary that ran; the recorded path may have changed since.
    image.path = build_id.empty() ? "" : AbsolutePath(cache.Find(build_id, name));
    if (image.path.empty() && !name.empty() && name[0] == '/' && PathExists(name)) image.path = name;
    if (image.path.empty()) {
      missing.insert(build_id.empty() ? name : absl::StrCat(name, " (build-id ", build_id, ")"));
      result.missing_binaries.Add({name, build_id, len});
      continue;
    }
    if (image.kind != ImageKind::kFile) {
      // meta.json keeps vDSO images inside the trace directory (docs/trace-dir.md).
      const std::string copy = absl::StrCat(kImagesSubdir, "/vdso.", build_id.empty() ? std::to_string(pid) : build_id, ".so");
      if (!PathExists(writer->FilePath(copy))) {
        absl::Status st = MakeDirs(writer->FilePath(kImagesSubdir));
        absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(image.path);
        if (!bytes.ok()) return bytes.status();
        if (st.ok()) st = WriteFileAtomic(writer->FilePath(copy), *bytes);
        if (!st.ok()) return st;
      }
      image.path = copy;
    }
    meta.images.push_back(image);
  }
  if (!missing.empty()) {
    meta.notes.push_back(absl::StrFormat(
        "%d executable mappings have no binary (not at the recorded path, not in build-id dirs [%s]): %s",
        missing.size(), absl::StrJoin(options.buildid_dirs, ", "), absl::StrJoin(missing, ", ")));
  }
  absl::Status st = writer->Commit(meta);
  if (!st.ok()) return st;
  return result;
}

}  // namespace ptd::perfdata
