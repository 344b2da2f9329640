#include "perfdata/perf_data_writer.h"

#include "perfdata/perf_format.h"

namespace ptd::perfdata {

void Put64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
void Put32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }

void PerfDataWriter::AddAttr(std::string attr, std::vector<uint64_t> ids) {
  attrs_.push_back(std::move(attr));
  ids_.push_back(std::move(ids));
}

void PerfDataWriter::AppendAuxtrace(const std::string& record, const std::string& payload) {
  auxtrace_index_.emplace_back(data_.size(), record.size());
  data_ += record;
  data_ += payload;
}

std::string PerfDataWriter::HeaderString(const std::string& s) {
  // perf aligns header strings to NAME_ALIGN (64) including the NUL.
  const uint32_t len = static_cast<uint32_t>((s.size() + 1 + 63) / 64 * 64);
  std::string out;
  Put32(&out, len);
  out += s;
  out.append(len - s.size(), '\0');
  return out;
}

std::string PerfDataWriter::HeaderStringList(const std::vector<std::string>& list) {
  std::string out;
  Put32(&out, static_cast<uint32_t>(list.size()));
  for (const std::string& s : list) out += HeaderString(s);
  return out;
}

std::string PerfDataWriter::Serialize() const {
  const uint64_t attr_size = attrs_.empty() ? 0 : attrs_[0].size() + 16;
  // Layout: header | ids of every attr | attrs | data | feature table | feature bodies.
  uint64_t pos = kFileHeaderSize;
  std::vector<uint64_t> ids_offset;
  std::string ids_bytes;
  for (const auto& ids : ids_) {
    ids_offset.push_back(pos + ids_bytes.size());
    for (uint64_t id : ids) Put64(&ids_bytes, id);
  }
  pos += ids_bytes.size();
  const uint64_t attrs_offset = pos;
  std::string attrs_bytes;
  for (size_t i = 0; i < attrs_.size(); ++i) {
    attrs_bytes += attrs_[i];
    Put64(&attrs_bytes, ids_offset[i]);
    Put64(&attrs_bytes, ids_[i].size() * 8);
  }
  pos += attrs_bytes.size();
  const uint64_t data_offset = pos;
  pos += data_.size();

  std::map<int, std::string> features = features_;
  if (!auxtrace_index_.empty()) {
    // HEADER_AUXTRACE: u64 count, then {u64 file_offset, u64 sz (record size)} each.
    std::string index;
    Put64(&index, auxtrace_index_.size());
    for (const auto& [offset, size] : auxtrace_index_) {
      Put64(&index, data_offset + offset);
      Put64(&index, size);
    }
    features[kFeatAuxtrace] = index;
  }
  uint64_t feature_bits[4] = {0, 0, 0, 0};
  for (const auto& [bit, body] : features) feature_bits[bit / 64] |= 1ull << (bit % 64);
  std::string table, bodies;
  uint64_t body_pos = pos + features.size() * 16;
  for (const auto& [bit, body] : features) {
    Put64(&table, body_pos + bodies.size());
    Put64(&table, body.size());
    bodies += body;
  }

  std::string out;
  Put64(&out, kPerfFileMagic);
  Put64(&out, kFileHeaderSize);
  Put64(&out, attr_size);
  Put64(&out, attrs_offset);
  Put64(&out, attrs_bytes.size());
  Put64(&out, data_offset);
  Put64(&out, data_.size());
  Put64(&out, 0);  // event_types: unused since perf 3.x
  Put64(&out, 0);
  for (uint64_t word : feature_bits) Put64(&out, word);
  out += ids_bytes;
  out += attrs_bytes;
  out += data_;
  out += table;
  out += bodies;
  return out;
}

}  // namespace ptd::perfdata
