#include "sideband/record_builder.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>


namespace ptd {
namespace {

// The header's size field is 16 bits; strings longer than PATH_MAX never come from the
// kernel, so longer ones are cut rather than made unencodable.
constexpr size_t kMaxString = 4095;
constexpr size_t kMaxRecordSize = 0xfff8;

class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void Put(const T& value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void PutBytes(const std::vector<uint8_t>& bytes, size_t max) {
    out_.insert(out_.end(), bytes.begin(), bytes.begin() + std::min(bytes.size(), max));
  }
  // NUL-terminated, padded with NULs to a multiple of 8 bytes (as perf_event_mmap_event
  // and perf_event_comm_event do).
  void PutPaddedString(const std::string& s) {
    size_t len = std::min(s.size(), kMaxString);
    out_.insert(out_.end(), s.begin(), s.begin() + len);
    size_t padded = (len + 1 + 7) & ~size_t{7};
    out_.insert(out_.end(), padded - len, 0);
  }

 private:
  std::vector<uint8_t>& out_;
};

// What follows a record's fixed fields. Records of fixed fields only have nothing more.
void PutRest(const auto&, Encoder&) {}

void PutRest(const OtherRecord& r, Encoder& e) { e.PutBytes(r.payload, kMaxRecordSize - 128); }

void PutRest(const MmapRecord& r, Encoder& e) { e.PutPaddedString(r.filename); }

void PutRest(const Mmap2Record& r, Encoder& e) {
  if (r.has_build_id) {
    e.Put(r.build_id_size), e.Put(uint8_t{0}), e.Put(uint16_t{0}), e.Put(r.build_id);
  } else {
    e.Put(r.maj), e.Put(r.min), e.Put(r.ino), e.Put(r.ino_generation);
  }
  e.Put(r.prot), e.Put(r.flags);
  e.PutPaddedString(r.filename);
}

void PutRest(const CommRecord& r, Encoder& e) { e.PutPaddedString(r.comm); }

void PutRest(const NamespacesRecord& r, Encoder& e) {
  size_t count = std::min<size_t>(r.namespaces.size(), 4000);
  e.Put(uint64_t{count});
  for (size_t i = 0; i < count; ++i) e.Put(r.namespaces[i].first), e.Put(r.namespaces[i].second);
}

void PutRest(const KsymbolRecord& r, Encoder& e) { e.PutPaddedString(r.name); }

void PutRest(const CgroupRecord& r, Encoder& e) { e.PutPaddedString(r.path); }

void PutRest(const TextPokeRecord& r, Encoder& e) {
  uint16_t old_len = static_cast<uint16_t>(std::min<size_t>(r.old_bytes.size(), 0x7f00));
  uint16_t new_len = static_cast<uint16_t>(std::min<size_t>(r.new_bytes.size(), 0x7f00));
  e.Put(old_len), e.Put(new_len);
  std::vector<uint8_t> bytes(r.old_bytes.begin(), r.old_bytes.begin() + old_len);
  bytes.insert(bytes.end(), r.new_bytes.begin(), r.new_bytes.begin() + new_len);
  size_t used = 8 + 4 + bytes.size();
  bytes.resize(bytes.size() + ((8 - used % 8) % 8), 0);  // kernel pads to u64
  e.PutBytes(bytes, bytes.size());
}

void EncodeBody(const PerfRecordBody& body, Encoder& e) {
  std::visit(
      [&e](const auto& r) {
        ForEachFixedField(r, [&e](const auto& field) {
          e.Put(field);
          return true;
        });
        PutRest(r, e);
      },
      body);
}

uint16_t MiscFor(const PerfRecordBody& body, uint16_t misc) {
  auto set = [&misc](uint16_t bit, bool on) { misc = on ? (misc | bit) : (misc & ~bit); };
  if (const auto* r = std::get_if<MmapRecord>(&body)) {
    set(kPerfMiscMmapData, r->data);
  } else if (const auto* r = std::get_if<Mmap2Record>(&body)) {
    set(kPerfMiscMmapData, r->data);
    set(kPerfMiscMmapBuildId, r->has_build_id);
  } else if (const auto* r = std::get_if<CommRecord>(&body)) {
    set(kPerfMiscCommExec, r->exec);
  } else if (const auto* r = std::get_if<SwitchRecord>(&body)) {
    set(kPerfMiscSwitchOut, r->out);
    set(kPerfMiscSwitchOutPreempt, r->out && r->preempt);
  } else if (const auto* r = std::get_if<SwitchCpuWideRecord>(&body)) {
    set(kPerfMiscSwitchOut, r->out);
    set(kPerfMiscSwitchOutPreempt, r->out && r->preempt);
  }
  return misc;
}

void EncodeSampleId(const SampleId& id, uint64_t sample_type, Encoder& e) {
  ForEachSampleIdField(sample_type, id, [&e](bool, const auto& field) { e.Put(field); });
}

}  // namespace

uint32_t RecordTypeOf(const PerfRecordBody& body) {
  if (const auto* r = std::get_if<ThrottleRecord>(&body); r != nullptr && r->unthrottle) {
    return kPerfRecordUnthrottle;
  }
  return std::visit([](const auto& r) { return std::decay_t<decltype(r)>::kLayout.type; }, body);
}

RecordBuilder::RecordBuilder(RecordFormat format) : format_(format) {}

void RecordBuilder::Append(const PerfRecord& record) {
  const size_t start = bytes_.size();
  Encoder e(bytes_);
  uint32_t type = RecordTypeOf(record.body);
  if (type == 0) type = record.type;
  e.Put(type);
  e.Put(MiscFor(record.body, record.misc));
  e.Put(uint16_t{0});  // size, patched below
  EncodeBody(record.body, e);
  // Kernel records are multiples of 8 bytes (only an OtherRecord payload can be
  // unaligned); the sample_id trailer must stay at the very end.
  if (type < kPerfRecordUserTypeStart) {
    bytes_.resize(start + ((bytes_.size() - start + 7) & ~size_t{7}), 0);
  }
  if (format_.sample_id_all && RecordHasSampleIdTrailer(type)) {
    EncodeSampleId(record.sample_id, format_.sample_type, e);
  }
  uint16_t size = static_cast<uint16_t>(bytes_.size() - start);
  std::memcpy(bytes_.data() + start + 6, &size, 2);
}

void RecordBuilder::Append(PerfRecordBody body, const SampleId& sample_id) {
  PerfRecord record;
  if (std::holds_alternative<MmapRecord>(body) || std::holds_alternative<Mmap2Record>(body)) {
    record.misc = kPerfMiscUser;
  }
  record.body = std::move(body);
  record.sample_id = sample_id;
  Append(record);
}

std::vector<uint8_t> EncodeRecord(const PerfRecord& record, RecordFormat format) {
  RecordBuilder builder(format);
  builder.Append(record);
  return builder.Take();
}

}  // namespace ptd
