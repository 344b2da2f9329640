#include "sideband/record_reader.h"

#include <array>
#include <cstring>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ptd {
namespace {

constexpr size_t kHeaderSize = 8;

// Bounds-checked little-endian cursor over one record's body.
class BodyCursor {
 public:
  BodyCursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t remaining() const { return size_ - pos_; }
  template <typename T>
  bool Read(T& out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(&out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool ReadBytes(size_t n, std::vector<uint8_t>& out) {
    if (remaining() < n) return false;
    out.assign(data_ + pos_, data_ + pos_ + n);
    pos_ += n;
    return true;
  }
  // The rest of the body is a NUL-terminated string padded with NULs (the kernel pads
  // to 8 bytes). False when no NUL is found before the body ends.
  bool ReadPaddedString(std::string& out) {
    const void* nul = std::memchr(data_ + pos_, 0, remaining());
    if (nul == nullptr) return false;
    size_t len = static_cast<const uint8_t*>(nul) - (data_ + pos_);
    out.assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ = size_;
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

constexpr char kShort[] = "body too short for its fixed fields";

// What follows a record's fixed fields, and its flags in the header's misc bits: "" or
// what is wrong. Records of fixed fields only have nothing more.
template <typename Record>
std::string ReadRest(BodyCursor&, uint32_t, uint16_t, Record&) {
  return "";
}

std::string ReadRest(BodyCursor& c, uint32_t, uint16_t misc, MmapRecord& r) {
  if (!c.ReadPaddedString(r.filename)) return "filename not NUL-terminated";
  r.data = misc & kPerfMiscMmapData;
  return "";
}

std::string ReadRest(BodyCursor& c, uint32_t, uint16_t misc, Mmap2Record& r) {
  r.has_build_id = misc & kPerfMiscMmapBuildId;
  if (r.has_build_id) {
    uint8_t reserved1;
    uint16_t reserved2;
    if (!c.Read(r.build_id_size) || !c.Read(reserved1) || !c.Read(reserved2) ||
        !c.Read(r.build_id))
      return kShort;
    if (r.build_id_size > r.build_id.size()) return "build_id_size larger than 20";
  } else {
    if (!c.Read(r.maj) || !c.Read(r.min) || !c.Read(r.ino) || !c.Read(r.ino_generation))
      return kShort;
  }
  if (!c.Read(r.prot) || !c.Read(r.flags)) return kShort;
  if (!c.ReadPaddedString(r.filename)) return "filename not NUL-terminated";
  r.data = misc & kPerfMiscMmapData;
  return "";
}

std::string ReadRest(BodyCursor& c, uint32_t, uint16_t misc, CommRecord& r) {
  if (!c.ReadPaddedString(r.comm)) return "comm not NUL-terminated";
  r.exec = misc & kPerfMiscCommExec;
  return "";
}

// SWITCH and SWITCH_CPU_WIDE: the direction and preemption are misc bits.
template <typename Record>
  requires std::is_same_v<Record, SwitchRecord> || std::is_same_v<Record, SwitchCpuWideRecord>
std::string ReadRest(BodyCursor&, uint32_t, uint16_t misc, Record& r) {
  r.out = misc & kPerfMiscSwitchOut;
  r.preempt = r.out && (misc & kPerfMiscSwitchOutPreempt);
  return "";
}

std::string ReadRest(BodyCursor&, uint32_t type, uint16_t, ThrottleRecord& r) {
  r.unthrottle = type == kPerfRecordUnthrottle;
  return "";
}

std::string ReadRest(BodyCursor& c, uint32_t, uint16_t, NamespacesRecord& r) {
  uint64_t count;
  if (!c.Read(count)) return kShort;
  if (count > c.remaining() / 16) return "nr_namespaces larger than the record";
  r.namespaces.resize(count);
  for (auto& [dev, ino] : r.namespaces) {
    c.Read(dev);
    c.Read(ino);
  }
  return "";
}

std::string ReadRest(BodyCursor& c, uint32_t, uint16_t, KsymbolRecord& r) {
  if (!c.ReadPaddedString(r.name)) return "name not NUL-terminated";
  return "";
}

std::string ReadRest(BodyCursor& c, uint32_t, uint16_t, CgroupRecord& r) {
  if (!c.ReadPaddedString(r.path)) return "path not NUL-terminated";
  return "";
}

std::string ReadRest(BodyCursor& c, uint32_t, uint16_t, TextPokeRecord& r) {
  uint16_t old_len, new_len;
  if (!c.Read(old_len) || !c.Read(new_len)) return kShort;
  if (!c.ReadBytes(old_len, r.old_bytes) || !c.ReadBytes(new_len, r.new_bytes))
    return "old_len + new_len larger than the record";
  return "";
}

std::string ReadRest(BodyCursor& c, uint32_t, uint16_t, OtherRecord& r) {
  c.ReadBytes(c.remaining(), r.payload);
  return "";
}

// Fills `body` with a Record from the record's body bytes; returns "" or what is wrong.
template <typename Record>
std::string Parse(uint32_t type, uint16_t misc, BodyCursor& c, PerfRecordBody& body) {
  Record r;
  if (!ForEachFixedField(r, [&c](auto& field) { return c.Read(field); })) return kShort;
  std::string problem = ReadRest(c, type, misc, r);
  if (problem.empty()) body = std::move(r);
  return problem;
}

// Parse<Record> by header type, for the types a PerfRecordBody alternative models.
using BodyParser = std::string (*)(uint32_t, uint16_t, BodyCursor&, PerfRecordBody&);
constexpr auto kBodyParsers = []<size_t... I>(std::index_sequence<I...>) {
  std::array<BodyParser, kPerfRecordAuxOutputHwId + 1> parsers{};
  ((parsers[std::variant_alternative_t<I, PerfRecordBody>::kLayout.type] =
        &Parse<std::variant_alternative_t<I, PerfRecordBody>>),
   ...);
  parsers[kPerfRecordUnthrottle] = &Parse<ThrottleRecord>;
  return parsers;
}(std::make_index_sequence<std::variant_size_v<PerfRecordBody>>());

std::string ParseBody(uint32_t type, uint16_t misc, BodyCursor c, PerfRecordBody& body) {
  BodyParser parse = type < kBodyParsers.size() ? kBodyParsers[type] : nullptr;
  if (parse == nullptr) parse = &Parse<OtherRecord>;
  return parse(type, misc, c, body);
}

bool IsModelledType(uint32_t type) {
  return type >= kPerfRecordMmap && type <= kPerfRecordAuxOutputHwId &&
         type != kPerfRecordRead && type != kPerfRecordSample;
}

}  // namespace

RecordReader::RecordReader(absl::Span<const uint8_t> bytes, std::string source,
                           RecordFormat format)
    : bytes_(bytes), source_(std::move(source)), format_(format) {}

absl::Status RecordReader::Error(uint64_t at, uint32_t type, const std::string& what) const {
  std::string record =
      type == 0 ? std::string("record") : absl::StrCat(PerfRecordTypeName(type), " record");
  return absl::DataLossError(absl::StrFormat("%s: byte offset %u (0x%x): %s: %s", source_,
                                             at, at, record, what));
}

absl::StatusOr<std::optional<PerfRecord>> RecordReader::Next() {
  if (!sticky_error_.ok()) return sticky_error_;
  const uint64_t left = bytes_.size() - offset_;
  if (left == 0) return std::optional<PerfRecord>();
  const uint8_t* p = bytes_.data() + offset_;
  if (left < kHeaderSize) {
    sticky_error_ = Error(offset_, 0,
                          absl::StrCat("truncated header: ", left, " bytes left, need 8"));
    return sticky_error_;
  }
  uint32_t type;
  uint16_t misc, size;
  std::memcpy(&type, p, 4);
  std::memcpy(&misc, p + 4, 2);
  std::memcpy(&size, p + 6, 2);
  if (size < kHeaderSize) {
    sticky_error_ = Error(offset_, type, absl::StrCat("size ", size,
                                                      " is smaller than the 8-byte header"));
    return sticky_error_;
  }
  if (size > left) {
    sticky_error_ = Error(offset_, type, absl::StrCat("truncated: size ", size, " but only ",
                                                      left, " bytes left"));
    return sticky_error_;
  }
  // The kernel pads every record it writes to a multiple of 8 bytes (perf_output_*
  // aligns strings with ALIGN(…, sizeof(u64))); perf tool records need not be.
  const bool kernel_type = type < kPerfRecordUserTypeStart;
  if (kernel_type && size % 8 != 0) {
    sticky_error_ = Error(offset_, type,
                          absl::StrCat("size ", size, " is not a multiple of 8"));
    return sticky_error_;
  }
  PerfRecord record;
  record.type = type;
  record.misc = misc;
  record.size = size;
  record.offset = offset_;
  size_t body_size = size - kHeaderSize;
  if (format_.sample_id_all && RecordHasSampleIdTrailer(type)) {
    const size_t trailer = SampleIdSize(format_.sample_type);
    if (body_size >= trailer) {
      body_size -= trailer;
      record.sample_id = ParseSampleId(p + kHeaderSize + body_size, format_.sample_type);
    } else if (IsModelledType(type)) {
      sticky_error_ = Error(offset_, type,
                            absl::StrCat("size ", size, " leaves no room for the ", trailer,
                                         "-byte sample_id trailer"));
      return sticky_error_;
    }
    // A future type too small for the trailer: its layout is unknown, keep it whole.
  }
  std::string problem =
      ParseBody(type, misc, BodyCursor(p + kHeaderSize, body_size), record.body);
  if (!problem.empty()) {
    sticky_error_ = Error(offset_, type, problem);
    return sticky_error_;
  }
  offset_ += size;
  return std::optional<PerfRecord>(std::move(record));
}

RecordList ReadRecordsUpToError(absl::Span<const uint8_t> bytes, const std::string& source,
                                RecordFormat format) {
  RecordList list;
  RecordReader reader(bytes, source, format);
  while (true) {
    absl::StatusOr<std::optional<PerfRecord>> next = reader.Next();
    if (!next.ok()) {
      list.error = next.status();
      break;
    }
    if (!next->has_value()) break;
    PerfRecord& record = **next;
    ++list.counters.records;
    list.counters.bytes += record.size;
    ++list.counters.by_type[record.type];
    if (std::holds_alternative<OtherRecord>(record.body)) {
      ++list.counters.other_records;
      if (record.type > kPerfRecordAuxOutputHwId) ++list.counters.unknown_type_records;
    }
    list.records.push_back(std::move(record));
  }
  return list;
}

absl::StatusOr<RecordList> ReadAllRecords(absl::Span<const uint8_t> bytes,
                                          const std::string& source, RecordFormat format) {
  RecordList list = ReadRecordsUpToError(bytes, source, format);
  if (!list.error.ok()) return list.error;
  return list;
}

}  // namespace ptd
