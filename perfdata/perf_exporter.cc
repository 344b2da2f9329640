#include "perfdata/perf_exporter.h"

#include <linux/perf_event.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/elf_build_id.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "perfdata/build_id_cache.h"
#include "perfdata/intel_pt_info.h"
#include "perfdata/perf_data_writer.h"
#include "perfdata/perf_format.h"
#include "perfdata/sample_id.h"
#include "ptd/version.h"
#include "sideband/sideband_attr.h"

namespace ptd::perfdata {
namespace {

// Every sideband record is re-stamped with this layout (what perf record uses).
constexpr uint64_t kExportSampleType =
    PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;

uint64_t FieldBits(uint64_t value, uint64_t mask) { return (value << __builtin_ctzll(mask)) & mask; }

// perf_event_attr.config: as recorded, or rebuilt from the named fields (emulated).
uint64_t ExportConfig(const PtSettings& pt) {
  uint64_t config = pt.config;
  if (config == 0) {
    auto field = [&](const char* name, uint64_t dflt) {
      auto it = pt.fields.find(name);
      return it == pt.fields.end() ? dflt : it->second;
    };
    if (field("tsc", 0)) config |= kTscBit;
    if (field("mtc", 0)) config |= kMtcBit;
    if (field("cyc", 0)) config |= kCycBit;
    if (field("noretcomp", 0)) config |= kNoRetCompBit;
    config |= FieldBits(field("mtc_period", 0), kMtcPeriodMask);
    config |= FieldBits(field("cyc_thresh", 0), kCycThreshMask);
    config |= FieldBits(field("psb_period", 0), kPsbPeriodMask);
  }
  // perf treats a trace without BranchEn as power-event-only; ours are branch traces.
  return config | kPtEnBit | kBranchEnBit;
}

std::string Record(uint32_t type, uint16_t misc, const std::string& body) {
  std::string out;
  Put32(&out, type);
  out.append(reinterpret_cast<const char*>(&misc), 2);
  const uint16_t size = static_cast<uint16_t>(8 + body.size());
  out.append(reinterpret_cast<const char*>(&size), 2);
  return out + body;
}

std::string PerfCpuidString(const CpuId& cpu) {
  const char* vendor = cpu.vendor == "intel" ? "GenuineIntel" : cpu.vendor == "amd" ? "AuthenticAMD" : "Unknown";
  return absl::StrFormat("%s,%u,%u,%u", vendor, cpu.family, cpu.model, cpu.stepping);
}

struct TimedRecord {
  uint64_t time = 0;
  std::string bytes;
};

// Reads one sideband file and re-stamps every kernel record's sample_id.
absl::Status CollectSideband(const std::string& trace_dir, const SidebandFile& file,
                             std::vector<TimedRecord>* out, PerfExportResult* result) {
  const std::string path = ResolveTracePath(trace_dir, file.file);
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  const uint64_t trailer = file.sample_id_all ? SampleIdSize(file.sample_type) : 0;
  size_t skipped = 0;
  for (uint64_t pos = 0; pos < bytes->size();) {
    if (bytes->size() - pos < 8) {
      return absl::DataLossError(absl::StrFormat("%s: offset 0x%x: truncated record header", path, pos));
    }
    uint32_t type;
    uint16_t misc, size;
    std::memcpy(&type, bytes->data() + pos, 4);
    std::memcpy(&misc, bytes->data() + pos + 4, 2);
    std::memcpy(&size, bytes->data() + pos + 6, 2);
    if (size < 8 || size > bytes->size() - pos) {
      return absl::DataLossError(absl::StrFormat("%s: offset 0x%x: %s has size %u, outside [8, %u]", path, pos,
                                                 RecordTypeName(type), size, bytes->size() - pos));
    }
    auto record = absl::Span<const uint8_t>(*bytes).subspan(pos, size);
    pos += size;
    if (type == PERF_RECORD_SAMPLE || type >= kRecordHeaderAttr || size < 8 + trailer) {
      ++skipped;
      continue;
    }
    SampleId id;
    if (trailer > 0) ParseSampleIdTrailer(record, file.sample_type, &id);
    // What the trailer lacks: -1 (perf's "unknown"), or the file's CPU when it has none.
    if (!id.has_tid) id.pid = id.tid = static_cast<uint32_t>(-1);
    if (!id.has_cpu) id.cpu = static_cast<uint32_t>(file.sample_type & PERF_SAMPLE_CPU ? -1 : file.cpu);
    id.id = kExportEventId;
    std::string body(reinterpret_cast<const char*>(record.data() + 8), size - 8 - trailer);
    AppendSampleId(id, kExportSampleType & ~PERF_SAMPLE_IP, &body);
    out->push_back({id.time, Record(type, misc, body)});
  }
  if (skipped > 0) result->notes.push_back(absl::StrFormat("%s: %d records skipped (samples, perf records)", path, skipped));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PerfExportResult> ExportPerfData(const PerfExportOptions& options) {
  absl::StatusOr<TraceMeta> meta_or = ReadTraceMeta(options.trace_dir);
  if (!meta_or.ok()) return meta_or.status();
  const TraceMeta& meta = *meta_or;
  PerfExportResult result;
  result.buildid_dir = options.buildid_dir.empty() ? options.output + ".buildid" : options.buildid_dir;

  const bool per_cpu = meta.per == "cpu";
  const uint64_t config = ExportConfig(meta.pt);
  IntelPtInfo info;
  info[kWordPmuType] = meta.pt.pmu_type >= 0 ? meta.pt.pmu_type : kExportDefaultPtPmuType;
  info[kWordTimeShift] = meta.time.time_shift;
  info[kWordTimeMult] = meta.time.time_mult;
  info[kWordTimeZero] = meta.time.time_zero;
  // Without a real TSC conversion perf decodes "timeless": each stream whole, in order.
  info[kWordCapUserTimeZero] = meta.time.cap_user_time_zero ? 1 : 0;
  info[kWordTscBit] = kTscBit;
  info[kWordNoRetCompBit] = kNoRetCompBit;
  info[kWordHaveSchedSwitch] = per_cpu ? 3 : 0;
  info[kWordPerCpuMmaps] = per_cpu ? 1 : 0;
  info[kWordMtcBit] = kMtcBit;
  info[kWordMtcFreqBits] = kMtcPeriodMask;
  info[kWordTscCtcRatioN] = meta.pt.cpuid_0x15_ebx;
  info[kWordTscCtcRatioD] = meta.pt.cpuid_0x15_eax;
  info[kWordCycBit] = kCycBit;
  info[kWordMaxNonTurboRatio] = meta.pt.nom_freq;
  info.filter = meta.pt.ip_filter;

  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.type = static_cast<uint32_t>(info[kWordPmuType]);
  attr.size = sizeof(attr);
  attr.config = config;
  attr.sample_period = 1;
  attr.sample_type = kExportSampleType;
  attr.read_format = PERF_FORMAT_ID;
  attr.exclude_kernel = meta.pt.user_only ? 1 : 0;
  attr.exclude_hv = 1;
  SetSidebandRecordBits(/*context_switches=*/per_cpu, &attr);

  PerfDataWriter writer;
  writer.AddAttr(std::string(reinterpret_cast<const char*>(&attr), sizeof(attr)), {kExportEventId});

  // AUXTRACE_INFO first: perf sets up the decoder from it before any AUXTRACE.
  std::string info_body;
  Put32(&info_body, kAuxtraceTypeIntelPt);
  Put32(&info_body, 0);
  for (uint64_t word : SerializeIntelPtInfo(info)) Put64(&info_body, word);
  writer.AppendRecord(Record(kRecordAuxtraceInfo, 0, info_body));

  // One AUXTRACE record per chunk; payloads padded to 8 bytes with PAD packets (0x00).
  for (size_t idx = 0; idx < meta.streams.size(); ++idx) {
    const PtStream& stream = meta.streams[idx];
    const std::string path = ResolveTracePath(options.trace_dir, stream.file);
    absl::StatusOr<std::string> bytes = ReadFileToString(path);
    if (!bytes.ok()) return bytes.status();
    for (const PtChunk& chunk : stream.chunks) {
      if (chunk.file_offset > bytes->size() || chunk.size > bytes->size() - chunk.file_offset) {
        return absl::DataLossError(absl::StrFormat("%s: chunk [0x%x, +0x%x) lies outside the %u-byte file", path,
                                                   chunk.file_offset, chunk.size, bytes->size()));
      }
      std::string payload = bytes->substr(chunk.file_offset, chunk.size);
      payload.resize((payload.size() + 7) / 8 * 8, '\0');
      std::string body;
      Put64(&body, payload.size());
      Put64(&body, chunk.aux_offset);
      Put64(&body, chunk.time_ns);  // reference: any unique-ish value
      Put32(&body, static_cast<uint32_t>(idx));
      Put32(&body, static_cast<uint32_t>(stream.tid));
      Put32(&body, static_cast<uint32_t>(stream.cpu));
      Put32(&body, 0);
      writer.AppendAuxtrace(Record(kRecordAuxtrace, 0, body), payload);
      ++result.aux_records;
    }
  }

  std::vector<TimedRecord> sideband;
  for (const SidebandFile& file : meta.sideband) {
    absl::Status st = CollectSideband(options.trace_dir, file, &sideband, &result);
    if (!st.ok()) return st;
  }
  // perf orders by time anyway; files from several rings are merged here once.
  std::stable_sort(sideband.begin(), sideband.end(),
                   [](const TimedRecord& a, const TimedRecord& b) { return a.time < b.time; });
  for (const TimedRecord& r : sideband) writer.AppendRecord(r.bytes);
  result.sideband_records = sideband.size();

  // Build-id cache with every image we have a file for, and HEADER_BUILD_ID naming them.
  std::string build_ids;
  std::map<std::string, bool> done;
  for (const ImageEntry& image : meta.images) {
    if (image.path.empty() || done.count(image.name)) continue;
    const std::string source = ResolveTracePath(options.trace_dir, image.path);
    std::string build_id = image.build_id;
    if (build_id.empty()) {
      absl::StatusOr<std::string> id = ReadElfBuildId(source);
      if (!id.ok() || id->empty()) {
        result.notes.push_back(absl::StrCat(image.name, ": ",
                                            id.ok() ? absl::StrCat(source, ": no GNU build-id note")
                                                    : std::string(id.status().message())));
        continue;
      }
      build_id = *id;
    }
    absl::StatusOr<std::string> cached = BuildIdCache::Add(result.buildid_dir, build_id, image.name, source);
    if (!cached.ok()) {
      result.notes.push_back(std::string(cached.status().message()));
      continue;
    }
    done[image.name] = true;
    ++result.cached_binaries;
    std::string entry;
    Put32(&entry, static_cast<uint32_t>(image.pid));
    std::string raw_id;
    for (size_t i = 0; i + 1 < build_id.size() && raw_id.size() < 20; i += 2) {
      raw_id.push_back(static_cast<char>(std::stoi(build_id.substr(i, 2), nullptr, 16)));
    }
    const size_t id_len = raw_id.size();
    raw_id.resize(20, '\0');
    entry += raw_id;
    entry.push_back(static_cast<char>(id_len));  // size byte, valid with kBuildIdMiscSize
    entry.append(3, '\0');
    std::string name = image.name;
    name.resize((name.size() + 1 + 63) / 64 * 64, '\0');  // NAME_ALIGN
    entry += name;
    const uint16_t misc = PERF_RECORD_MISC_USER | kBuildIdMiscSize;
    build_ids += Record(kRecordHeaderBuildId, misc, entry);
  }
  writer.SetFeature(kFeatBuildId, build_ids);
  writer.SetFeature(kFeatHostname, PerfDataWriter::HeaderString(meta.host.hostname));
  writer.SetFeature(kFeatOsRelease, PerfDataWriter::HeaderString(meta.host.kernel_release));
  writer.SetFeature(kFeatVersion, PerfDataWriter::HeaderString(absl::StrCat("ptrace-direct ", kToolVersion)));
  writer.SetFeature(kFeatArch, PerfDataWriter::HeaderString("x86_64"));
  writer.SetFeature(kFeatCpuId, PerfDataWriter::HeaderString(PerfCpuidString(meta.host.cpu)));
  std::vector<std::string> cmdline = {"ptrace-direct", "export", "perf", options.trace_dir};
  writer.SetFeature(kFeatCmdline, PerfDataWriter::HeaderStringList(cmdline));
  std::string event_desc;
  Put32(&event_desc, 1);
  Put32(&event_desc, sizeof(attr));
  event_desc.append(reinterpret_cast<const char*>(&attr), sizeof(attr));
  Put32(&event_desc, 1);
  event_desc += PerfDataWriter::HeaderString("intel_pt//");
  Put64(&event_desc, kExportEventId);
  writer.SetFeature(kFeatEventDesc, event_desc);
  std::string pmus;
  Put32(&pmus, 1);
  Put32(&pmus, static_cast<uint32_t>(info[kWordPmuType]));
  pmus += PerfDataWriter::HeaderString("intel_pt");
  writer.SetFeature(kFeatPmuMappings, pmus);

  absl::Status st = WriteFileAtomic(options.output, writer.Serialize());
  if (!st.ok()) return st;
  return result;
}

}  // namespace ptd::perfdata
