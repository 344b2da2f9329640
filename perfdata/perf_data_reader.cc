#include "perfdata/perf_data_reader.h"

#include <linux/perf_event.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/hex.h"
#include "perfdata/perf_format.h"
#include "perfdata/sample_id.h"

namespace ptd::perfdata {
namespace {

// perf_event_attr field offsets (linux/perf_event.h, stable since PERF_ATTR_SIZE_VER0).
constexpr uint64_t kAttrTypeOff = 0;
constexpr uint64_t kAttrSizeOff = 4;
constexpr uint64_t kAttrConfigOff = 8;
constexpr uint64_t kAttrSampleTypeOff = 24;
constexpr uint64_t kAttrReadFormatOff = 32;
constexpr uint64_t kAttrFlagsOff = 40;
constexpr int kFlagExcludeKernel = 5;
constexpr int kFlagSampleIdAll = 18;
constexpr int kFlagContextSwitch = 26;

// Sanity limits: a perf.data with more than this is corrupt, not big.
constexpr uint64_t kMaxAttrs = 1 << 16;
constexpr uint64_t kMaxStringsInList = 1 << 16;

// perf_header_string: u32 len (including NUL and padding), then the bytes.
absl::StatusOr<std::string> ReadHeaderString(const ByteReader& r, uint64_t* pos,
                                             absl::string_view what) {
  absl::StatusOr<uint32_t> len = r.Read<uint32_t>(*pos, absl::StrCat(what, " length"));
  if (!len.ok()) return len.status();
  if (!r.Has(*pos + 4, *len)) {
    return r.Error(*pos, absl::StrFormat("%s of %u bytes runs past the section", what, *len));
  }
  std::string s = r.CString(*pos + 4, *len);
  *pos += 4 + *len;
  return s;
}

}  // namespace

const char* RecordTypeName(uint32_t type) {
  switch (type) {
    case PERF_RECORD_MMAP: return "PERF_RECORD_MMAP";
    case PERF_RECORD_LOST: return "PERF_RECORD_LOST";
    case PERF_RECORD_COMM: return "PERF_RECORD_COMM";
    case PERF_RECORD_EXIT: return "PERF_RECORD_EXIT";
    case PERF_RECORD_THROTTLE: return "PERF_RECORD_THROTTLE";
    case PERF_RECORD_UNTHROTTLE: return "PERF_RECORD_UNTHROTTLE";
    case PERF_RECORD_FORK: return "PERF_RECORD_FORK";
    case PERF_RECORD_READ: return "PERF_RECORD_READ";
    case PERF_RECORD_SAMPLE: return "PERF_RECORD_SAMPLE";
    case PERF_RECORD_MMAP2: return "PERF_RECORD_MMAP2";
    case PERF_RECORD_AUX: return "PERF_RECORD_AUX";
    case PERF_RECORD_ITRACE_START: return "PERF_RECORD_ITRACE_START";
    case PERF_RECORD_LOST_SAMPLES: return "PERF_RECORD_LOST_SAMPLES";
    case PERF_RECORD_SWITCH: return "PERF_RECORD_SWITCH";
    case PERF_RECORD_SWITCH_CPU_WIDE: return "PERF_RECORD_SWITCH_CPU_WIDE";
    case PERF_RECORD_NAMESPACES: return "PERF_RECORD_NAMESPACES";
    case PERF_RECORD_KSYMBOL: return "PERF_RECORD_KSYMBOL";
    case PERF_RECORD_BPF_EVENT: return "PERF_RECORD_BPF_EVENT";
    case PERF_RECORD_CGROUP: return "PERF_RECORD_CGROUP";
    case PERF_RECORD_TEXT_POKE: return "PERF_RECORD_TEXT_POKE";
    case kRecordHeaderAttr: return "PERF_RECORD_HEADER_ATTR";
    case kRecordHeaderEventType: return "PERF_RECORD_HEADER_EVENT_TYPE";
    case kRecordHeaderTracingData: return "PERF_RECORD_HEADER_TRACING_DATA";
    case kRecordHeaderBuildId: return "PERF_RECORD_HEADER_BUILD_ID";
    case kRecordFinishedRound: return "PERF_RECORD_FINISHED_ROUND";
    case kRecordIdIndex: return "PERF_RECORD_ID_INDEX";
    case kRecordAuxtraceInfo: return "PERF_RECORD_AUXTRACE_INFO";
    case kRecordAuxtrace: return "PERF_RECORD_AUXTRACE";
    case kRecordAuxtraceError: return "PERF_RECORD_AUXTRACE_ERROR";
    case kRecordThreadMap: return "PERF_RECORD_THREAD_MAP";
    case kRecordCpuMap: return "PERF_RECORD_CPU_MAP";
    case kRecordStatConfig: return "PERF_RECORD_STAT_CONFIG";
    case kRecordStat: return "PERF_RECORD_STAT";
    case kRecordStatRound: return "PERF_RECORD_STAT_ROUND";
    case kRecordEventUpdate: return "PERF_RECORD_EVENT_UPDATE";
    case kRecordTimeConv: return "PERF_RECORD_TIME_CONV";
    case kRecordHeaderFeature: return "PERF_RECORD_HEADER_FEATURE";
    case kRecordCompressed: return "PERF_RECORD_COMPRESSED";
    case kRecordFinishedInit: return "PERF_RECORD_FINISHED_INIT";
    default: return "unknown record";
  }
}

absl::StatusOr<PerfData> PerfDataReader::ReadFile(const std::string& path) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  return Parse(*std::move(bytes), path);
}

absl::StatusOr<PerfData> PerfDataReader::Parse(std::vector<uint8_t> bytes,
                                               const std::string& source) {
  PerfData data;
  data.source = source;
  data.bytes = std::move(bytes);
  ByteReader file(data.bytes, source);
  absl::StatusOr<uint64_t> magic = file.Read<uint64_t>(0, "perf.data magic");
  if (!magic.ok()) return magic.status();
  if (*magic == kPerfFileMagicSwapped) {
    return file.Error(0, "big-endian perf.data (recorded on another architecture) is not supported");
  }
  if (*magic != kPerfFileMagic) return file.Error(0, "not a perf.data file (no PERFILE2 magic)");
  absl::StatusOr<uint64_t> header_size = file.Read<uint64_t>(8, "perf.data header size");
  if (!header_size.ok()) return header_size.status();

  PerfDataReader reader(&data);
  if (*header_size == kPipeHeaderSize) {
    data.pipe_mode = true;
    absl::Status st = reader.ParseRecords(file, kPipeHeaderSize, file.size());
    if (!st.ok()) return st;
  } else if (*header_size == kFileHeaderSize) {
    absl::Status st = reader.ParseFileMode(file);
    if (!st.ok()) return st;
  } else {
    return file.Error(8, absl::StrFormat("header size %u is neither file mode (%u) nor pipe mode (%u)",
                                         *header_size, kFileHeaderSize, kPipeHeaderSize));
  }
  return data;
}

absl::Status PerfDataReader::ParseFileMode(const ByteReader& file) {
  uint64_t h[11];
  for (int i = 0; i < 11; ++i) {
    absl::StatusOr<uint64_t> v = file.Read<uint64_t>(16 + 8 * i, "perf.data file header");
    if (!v.ok()) return v.status();
    h[i] = *v;
  }
  // h: attr_size, attrs{offset,size}, data{offset,size}, event_types{offset,size}, features[4]
  const uint64_t attr_size = h[0];
  out_->data_offset = h[3];
  out_->data_size = h[4];
  if (!file.Has(out_->data_offset, out_->data_size)) {
    return file.Error(32, absl::StrFormat("data section [0x%x, +0x%x) lies outside the %u-byte file",
                                          out_->data_offset, out_->data_size, file.size()));
  }
  absl::Status st = ParseAttrs(file, attr_size, h[1], h[2]);
  if (!st.ok()) return st;
  st = ParseFeatureSections(file, &h[7]);
  if (!st.ok()) return st;
  return ParseRecords(file, out_->data_offset, out_->data_offset + out_->data_size);
}

absl::StatusOr<PerfAttr> PerfDataReader::ParseAttr(const ByteReader& r, uint64_t pos,
                                                   uint64_t avail) const {
  absl::StatusOr<uint32_t> size = r.Read<uint32_t>(pos + kAttrSizeOff, "perf_event_attr.size");
  if (!size.ok()) return size.status();
  if (*size < PERF_ATTR_SIZE_VER0 || *size > avail) {
    return r.Error(pos, absl::StrFormat("perf_event_attr.size %u is outside [%u, %u]", *size,
                                        PERF_ATTR_SIZE_VER0, avail));
  }
  absl::StatusOr<absl::Span<const uint8_t>> raw = r.Bytes(pos, *size, "perf_event_attr");
  if (!raw.ok()) return raw.status();
  PerfAttr attr;
  attr.raw.assign(raw->begin(), raw->end());
  attr.type = *r.Read<uint32_t>(pos + kAttrTypeOff, "attr.type");
  attr.config = *r.Read<uint64_t>(pos + kAttrConfigOff, "attr.config");
  attr.sample_type = *r.Read<uint64_t>(pos + kAttrSampleTypeOff, "attr.sample_type");
  attr.read_format = *r.Read<uint64_t>(pos + kAttrReadFormatOff, "attr.read_format");
  attr.flags = *r.Read<uint64_t>(pos + kAttrFlagsOff, "attr flags");
  attr.exclude_kernel = (attr.flags >> kFlagExcludeKernel) & 1;
  attr.sample_id_all = (attr.flags >> kFlagSampleIdAll) & 1;
  attr.context_switch = (attr.flags >> kFlagContextSwitch) & 1;
  return attr;
}

absl::Status PerfDataReader::ParseAttrs(const ByteReader& file, uint64_t attr_size,
                                        uint64_t offset, uint64_t size) {
  if (attr_size < PERF_ATTR_SIZE_VER0 + 16) {
    return file.Error(16, absl::StrFormat("attr_size %u is too small", attr_size));
  }
  if (size % attr_size != 0 || size / attr_size > kMaxAttrs) {
    return file.Error(24, absl::StrFormat("attrs section size %u is not a multiple of attr_size %u",
                                          size, attr_size));
  }
  absl::StatusOr<ByteReader> section = file.Sub(offset, size, "attrs section");
  if (!section.ok()) return section.status();
  for (uint64_t pos = 0; pos < size; pos += attr_size) {
    absl::StatusOr<PerfAttr> attr = ParseAttr(*section, pos, attr_size - 16);
    if (!attr.ok()) return attr.status();
    const uint64_t ids_off = *section->Read<uint64_t>(pos + attr_size - 16, "attr ids offset");
    const uint64_t ids_size = *section->Read<uint64_t>(pos + attr_size - 8, "attr ids size");
    absl::StatusOr<ByteReader> ids = file.Sub(ids_off, ids_size, "attr ids");
    if (!ids.ok()) return ids.status();
    for (uint64_t i = 0; i + 8 <= ids_size; i += 8) {
      const uint64_t id = *ids->Read<uint64_t>(i, "attr id");
      attr->ids.push_back(id);
      attr_by_id_[id] = static_cast<int>(out_->attrs.size());
    }
    out_->attrs.push_back(*std::move(attr));
  }
  return absl::OkStatus();
}

absl::Status PerfDataReader::ParseFeatureSections(const ByteReader& file,
                                                  const uint64_t features[4]) {
  uint64_t table = out_->data_offset + out_->data_size;
  for (int bit = 0; bit < kFeatureBits; ++bit) {
    if (!((features[bit / 64] >> (bit % 64)) & 1)) continue;
    absl::StatusOr<uint64_t> off = file.Read<uint64_t>(table, absl::StrFormat("feature %d section", bit));
    if (!off.ok()) return off.status();
    absl::StatusOr<uint64_t> size = file.Read<uint64_t>(table + 8, absl::StrFormat("feature %d section", bit));
    if (!size.ok()) return size.status();
    table += 16;
    absl::StatusOr<ByteReader> section = file.Sub(*off, *size, absl::StrFormat("feature %d", bit));
    if (!section.ok()) return section.status();
    absl::Status st = ParseFeature(bit, *section);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status PerfDataReader::ParseFeature(int feature, const ByteReader& r) {
  PerfFeatures& f = out_->features;
  f.present.push_back(feature);
  uint64_t pos = 0;
  auto str = [&](std::string* dst, absl::string_view what) -> absl::Status {
    absl::StatusOr<std::string> s = ReadHeaderString(r, &pos, what);
    if (!s.ok()) return s.status();
    *dst = *std::move(s);
    return absl::OkStatus();
  };
  // The u32 element count that starts a list section, at most `max`; the elements follow.
  auto list_count = [&](absl::string_view section, uint64_t max,
                        absl::string_view elements) -> absl::StatusOr<uint32_t> {
    absl::StatusOr<uint32_t> n = r.Read<uint32_t>(0, absl::StrCat(section, " count"));
    if (!n.ok()) return n.status();
    if (*n > max) return r.Error(0, absl::StrFormat("%s claims %u %s", section, *n, elements));
    pos = 4;
    return n;
  };
  // A u32 at pos; pos moves past it.
  auto next_u32 = [&](absl::string_view what) -> absl::StatusOr<uint32_t> {
    absl::StatusOr<uint32_t> value = r.Read<uint32_t>(pos, what);
    if (value.ok()) pos += 4;
    return value;
  };
  switch (feature) {
    case kFeatHostname: return str(&f.hostname, "HEADER_HOSTNAME");
    case kFeatOsRelease: return str(&f.os_release, "HEADER_OSRELEASE");
    case kFeatVersion: return str(&f.perf_version, "HEADER_VERSION");
    case kFeatArch: return str(&f.arch, "HEADER_ARCH");
    case kFeatCpuDesc: return str(&f.cpu_desc, "HEADER_CPUDESC");
    case kFeatCpuId: return str(&f.cpuid, "HEADER_CPUID");
    case kFeatNrCpus: {
      absl::StatusOr<uint32_t> avail = r.Read<uint32_t>(0, "HEADER_NRCPUS");
      absl::StatusOr<uint32_t> online = r.Read<uint32_t>(4, "HEADER_NRCPUS");
      if (!avail.ok()) return avail.status();
      if (!online.ok()) return online.status();
      f.nr_cpus_available = *avail;
      f.nr_cpus_online = *online;
      return absl::OkStatus();
    }
    case kFeatTotalMem: {
      absl::StatusOr<uint64_t> mem = r.Read<uint64_t>(0, "HEADER_TOTAL_MEM");
      if (!mem.ok()) return mem.status();
      f.total_mem_kb = *mem;
      return absl::OkStatus();
    }
    case kFeatCmdline: {
      absl::StatusOr<uint32_t> n = list_count("HEADER_CMDLINE", kMaxStringsInList, "strings");
      if (!n.ok()) return n.status();
      f.cmdline.assign(*n, std::string());
      for (std::string& arg : f.cmdline) {
        if (absl::Status st = str(&arg, "HEADER_CMDLINE argument"); !st.ok()) return st;
      }
      return absl::OkStatus();
    }
    case kFeatBuildId: {
      while (pos + kRecordHeaderSize <= r.size()) {
        const uint16_t size = *r.Read<uint16_t>(pos + 6, "build-id entry size");
        if (size == 0) return r.Error(pos, "HEADER_BUILD_ID entry of size 0");
        absl::Status st = ParseBuildIdRecord(r, pos, size);
        if (!st.ok()) return st;
        pos += size;
      }
      return absl::OkStatus();
    }
    case kFeatPmuMappings: {
      absl::StatusOr<uint32_t> n = list_count("HEADER_PMU_MAPPINGS", kMaxStringsInList, "PMUs");
      if (!n.ok()) return n.status();
      for (uint32_t i = 0; i < *n; ++i) {
        absl::StatusOr<uint32_t> type = next_u32("PMU type");
        if (!type.ok()) return type.status();
        if (absl::Status st = str(&f.pmu_mappings[*type], "PMU name"); !st.ok()) return st;
      }
      return absl::OkStatus();
    }
    case kFeatEventDesc: {
      absl::StatusOr<uint32_t> n = list_count("HEADER_EVENT_DESC", kMaxAttrs, "events");
      if (!n.ok()) return n.status();
      absl::StatusOr<uint32_t> sz = r.Read<uint32_t>(4, "HEADER_EVENT_DESC attr size");
      if (!sz.ok()) return sz.status();
      pos = 8;
      for (uint32_t i = 0; i < *n; ++i) {
        pos += *sz;
        absl::StatusOr<uint32_t> nr_ids = next_u32("HEADER_EVENT_DESC id count");
        if (!nr_ids.ok()) return nr_ids.status();
        std::string name;
        if (absl::Status st = str(&name, "HEADER_EVENT_DESC name"); !st.ok()) return st;
        // The event order is the attrs order; ids confirm it when present.
        int index = static_cast<int>(i);
        if (*nr_ids > 0) {
          absl::StatusOr<uint64_t> id = r.Read<uint64_t>(pos, "HEADER_EVENT_DESC id");
          if (!id.ok()) return id.status();
          auto it = attr_by_id_.find(*id);
          if (it != attr_by_id_.end()) index = it->second;
        }
        if (!r.Has(pos, uint64_t{*nr_ids} * 8)) return r.Error(pos, "HEADER_EVENT_DESC ids run past the section");
        pos += uint64_t{*nr_ids} * 8;
        if (index < static_cast<int>(out_->attrs.size())) out_->attrs[index].name = std::move(name);
      }
      return absl::OkStatus();
    }
    default:
      return absl::OkStatus();  // kept as "present"; contents not needed
  }
}

absl::Status PerfDataReader::ParseBuildIdRecord(const ByteReader& r, uint64_t pos, uint16_t size) {
  if (size < kBuildIdRecordFixedSize || !r.Has(pos, size)) {
    return r.Error(pos, absl::StrFormat("build-id entry of %u bytes is truncated", size));
  }
  BuildIdEntry entry;
  entry.misc = *r.Read<uint16_t>(pos + 4, "build-id misc");
  entry.pid = *r.Read<int32_t>(pos + 8, "build-id pid");
  uint8_t len = 20;
  if (entry.misc & kBuildIdMiscSize) len = std::min<uint8_t>(*r.Read<uint8_t>(pos + 32, "build-id size"), 20);
  entry.build_id = HexString(*r.Bytes(pos + 12, len, "build-id"));
  entry.filename = r.CString(pos + kBuildIdRecordFixedSize, size - kBuildIdRecordFixedSize);
  out_->features.build_ids.push_back(std::move(entry));
  return absl::OkStatus();
}

int PerfDataReader::AttrForRecord(absl::Span<const uint8_t> record, uint32_t type) const {
  if (out_->attrs.empty()) return -1;
  if (out_->attrs.size() == 1) return 0;
  // perf requires every attr to put the id at the same place, so attr 0 tells where.
  const PerfAttr& first = out_->attrs[0];
  uint64_t id = 0;
  if (type == PERF_RECORD_SAMPLE) {
    const int off = SampleRecordIdOffset(first.sample_type);
    if (off < 0 || static_cast<size_t>(off) + 8 > record.size()) return -1;
    std::memcpy(&id, record.data() + off, 8);
  } else {
    if (!first.sample_id_all || !(first.sample_type & (PERF_SAMPLE_ID | PERF_SAMPLE_IDENTIFIER))) return -1;
    SampleId sid;
    if (!ParseSampleIdTrailer(record, first.sample_type, &sid)) return -1;
    id = sid.id;
  }
  // Records perf synthesizes (kernel maps, existing threads) carry id 0; perf then
  // takes the first attr, and so do we.
  if (id == 0) return 0;
  auto it = attr_by_id_.find(id);
  return it == attr_by_id_.end() ? -1 : it->second;
}

absl::Status PerfDataReader::ParseRecords(const ByteReader& file, uint64_t begin, uint64_t end) {
  uint64_t pos = begin;
  while (pos < end) {
    if (end - pos < kRecordHeaderSize) {
      return file.Error(pos, absl::StrFormat("%u trailing bytes are too short for a record header", end - pos));
    }
    const uint32_t type = *file.Read<uint32_t>(pos, "record type");
    const uint16_t misc = *file.Read<uint16_t>(pos + 4, "record misc");
    const uint16_t size = *file.Read<uint16_t>(pos + 6, "record size");
    if (size < kRecordHeaderSize || size > end - pos) {
      return file.Error(pos, absl::StrFormat("%s (type %u) has size %u, outside [8, %u]",
                                             RecordTypeName(type), type, size, end - pos));
    }
    uint64_t extra = 0;
    absl::Status st = ParseRecord(file, pos, type, misc, size, &extra);
    if (!st.ok()) return st;
    if (extra > end - pos - size) {
      return file.Error(pos, absl::StrFormat("%s payload of %u bytes runs past the end of the data (%u left)",
                                             RecordTypeName(type), extra, end - pos - size));
    }
    ++out_->record_counts[type];
    pos += size + extra;
  }
  return absl::OkStatus();
}

absl::Status PerfDataReader::ParseRecord(const ByteReader& file, uint64_t pos, uint32_t type,
                                         uint16_t misc, uint16_t size, uint64_t* extra_payload) {
  absl::StatusOr<ByteReader> rec = file.Sub(pos, size, RecordTypeName(type));
  if (!rec.ok()) return rec.status();
  auto too_short = [&](uint64_t need) {
    return file.Error(pos, absl::StrFormat("%s of %u bytes is shorter than its %u fixed bytes",
                                           RecordTypeName(type), size, need));
  };
  switch (type) {
    case kRecordAuxtrace: {
      if (size < kAuxtraceRecordSize) return too_short(kAuxtraceRecordSize);
      AuxtraceBuffer buf;
      buf.record_offset = pos;
      buf.payload_offset = pos + size;
      buf.size = *rec->Read<uint64_t>(8, "AUXTRACE size");
      buf.offset = *rec->Read<uint64_t>(16, "AUXTRACE offset");
      buf.reference = *rec->Read<uint64_t>(24, "AUXTRACE reference");
      buf.idx = *rec->Read<uint32_t>(32, "AUXTRACE idx");
      buf.tid = *rec->Read<int32_t>(36, "AUXTRACE tid");
      buf.cpu = *rec->Read<int32_t>(40, "AUXTRACE cpu");
      *extra_payload = buf.size;
      out_->aux_buffers.push_back(buf);
      return absl::OkStatus();
    }
    case kRecordAuxtraceInfo: {
      if (size < 16) return too_short(16);
      out_->auxtrace_type = *rec->Read<uint32_t>(8, "AUXTRACE_INFO type");
      if (*out_->auxtrace_type != kAuxtraceTypeIntelPt) return absl::OkStatus();
      std::vector<uint64_t> priv((size - 16) / 8);
      for (size_t i = 0; i < priv.size(); ++i) priv[i] = *rec->Read<uint64_t>(16 + 8 * i, "priv");
      absl::StatusOr<IntelPtInfo> info = ParseIntelPtInfo(priv);
      if (!info.ok()) {
        return file.Error(pos, absl::StrCat("PERF_RECORD_AUXTRACE_INFO: ", info.status().message()));
      }
      out_->intel_pt = *std::move(info);
      return absl::OkStatus();
    }
    case kRecordTimeConv: {
      if (size < 32) return too_short(32);
      out_->time_conv = TimeConv{*rec->Read<uint64_t>(8, "time_shift"), *rec->Read<uint64_t>(16, "time_mult"),
                                 *rec->Read<uint64_t>(24, "time_zero")};
      return absl::OkStatus();
    }
    case kRecordAuxtraceError:
      ++out_->auxtrace_errors;
      return absl::OkStatus();
    case kRecordHeaderAttr: {
      absl::StatusOr<PerfAttr> attr = ParseAttr(*rec, 8, size - 8);
      if (!attr.ok()) return attr.status();
      const uint64_t ids_begin = 8 + attr->raw.size();
      for (uint64_t i = ids_begin; i + 8 <= size; i += 8) {
        const uint64_t id = *rec->Read<uint64_t>(i, "HEADER_ATTR id");
        attr->ids.push_back(id);
        attr_by_id_[id] = static_cast<int>(out_->attrs.size());
      }
      out_->attrs.push_back(*std::move(attr));
      return absl::OkStatus();
    }
    case kRecordHeaderFeature: {
      if (size < 16) return too_short(16);
      const uint64_t feature = *rec->Read<uint64_t>(8, "HEADER_FEATURE id");
      if (feature >= kFeatureBits) return file.Error(pos, absl::StrFormat("HEADER_FEATURE id %u >= 256", feature));
      absl::StatusOr<ByteReader> body = rec->Sub(16, size - 16, "HEADER_FEATURE body");
      if (!body.ok()) return body.status();
      return ParseFeature(static_cast<int>(feature), *body);
    }
    case kRecordHeaderBuildId:
      return ParseBuildIdRecord(*rec, 0, size);
    case kRecordHeaderTracingData: {
      if (size < 12) return too_short(12);
      *extra_payload = *rec->Read<uint32_t>(8, "TRACING_DATA size");
      return absl::OkStatus();
    }
    case kRecordCompressed:
      return file.Error(pos, "PERF_RECORD_COMPRESSED (perf record -z) is not supported; "
                             "re-record without -z or run `perf inject -i in -o out` first");
    case PERF_RECORD_LOST:
      if (size >= 24) out_->lost_records += *rec->Read<uint64_t>(16, "LOST count");
      break;
    default:
      break;
  }
  if (type >= kRecordHeaderAttr) return absl::OkStatus();  // perf's own bookkeeping records
  RecordRef ref;
  ref.file_offset = pos;
  ref.type = type;
  ref.misc = misc;
  ref.size = size;
  ref.attr_index = AttrForRecord(*file.Bytes(pos, size, "record"), type);
  out_->records.push_back(ref);
  return absl::OkStatus();
}

}  // namespace ptd::perfdata
