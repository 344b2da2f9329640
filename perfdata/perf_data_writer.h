#pragma once
// Writes a file-mode perf.data ("PERFILE2"): header, attrs with their ids, the data
// section of records, and feature sections. Layout as perf.data-file-format.txt says:
// the feature section table sits right after the data section.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ptd::perfdata {

// Appends a host-endian (little-endian: perf.data of this machine) word to `out`.
void Put64(std::string* out, uint64_t v);
void Put32(std::string* out, uint32_t v);

class PerfDataWriter {
 public:
  // `attr` is a whole perf_event_attr (its size field set); all attrs must be one size.
  void AddAttr(std::string attr, std::vector<uint64_t> ids);
  // A complete record (header included, size field right).
  void AppendRecord(const std::string& record) { data_ += record; }
  // A PERF_RECORD_AUXTRACE and its payload. They are also listed in HEADER_AUXTRACE,
  // the index perf needs to queue the buffers up front and to allow `perf script -F`
  // fields (ip, addr ...) that the PT event's own sample_type lacks.
  void AppendAuxtrace(const std::string& record, const std::string& payload);
  void SetFeature(int feature, std::string bytes) { features_[feature] = std::move(bytes); }

  std::string Serialize() const;

  // Feature encodings shared by several HEADER_* sections.
  static std::string HeaderString(const std::string& s);  // u32 len, NUL-padded to 64
  static std::string HeaderStringList(const std::vector<std::string>& list);  // u32 n, strings

 private:
  std::vector<std::string> attrs_;
  std::vector<std::vector<uint64_t>> ids_;
  std::string data_;
  std::vector<std::pair<uint64_t, uint64_t>> auxtrace_index_;  // data-relative offset, record size
  std::map<int, std::string> features_;
};

}  // namespace ptd::perfdata
