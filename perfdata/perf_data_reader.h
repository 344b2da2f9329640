#pragma once
// Reads a perf.data, file mode ("PERFILE2" header, attrs, data section, feature
// sections) or pipe mode (16-byte header, then HEADER_ATTR / HEADER_FEATURE /
// AUXTRACE_INFO ... records in the stream). Every length is checked against the bytes
// present; errors name the file, the byte offset and the record.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "perfdata/byte_reader.h"
#include "perfdata/perf_data.h"

namespace ptd::perfdata {

class PerfDataReader {
 public:
  static absl::StatusOr<PerfData> ReadFile(const std::string& path);
  // `source` names the bytes in messages.
  static absl::StatusOr<PerfData> Parse(std::vector<uint8_t> bytes, const std::string& source);

 private:
  explicit PerfDataReader(PerfData* out) : out_(out) {}

  absl::Status ParseFileMode(const ByteReader& file);
  absl::Status ParseAttrs(const ByteReader& file, uint64_t attr_size, uint64_t offset,
                          uint64_t size);
  absl::Status ParseFeatureSections(const ByteReader& file, const uint64_t features[4]);
  absl::Status ParseFeature(int feature, const ByteReader& section);
  absl::Status ParseRecords(const ByteReader& file, uint64_t begin, uint64_t end);
  absl::Status ParseRecord(const ByteReader& file, uint64_t pos, uint32_t type, uint16_t misc,
                           uint16_t size, uint64_t* extra_payload);
  absl::StatusOr<PerfAttr> ParseAttr(const ByteReader& r, uint64_t pos, uint64_t avail) const;
  absl::Status ParseBuildIdRecord(const ByteReader& r, uint64_t pos, uint16_t size);
  int AttrForRecord(absl::Span<const uint8_t> record, uint32_t type) const;

  PerfData* out_;
  std::map<uint64_t, int> attr_by_id_;
};

}  // namespace ptd::perfdata
