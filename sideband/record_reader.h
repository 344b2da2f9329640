#pragma once
// Cuts a byte span of raw perf records (a DATA ring's contents, wrap-around undone) into
// typed PerfRecords. Never reads outside the span; every malformed record is an error
// naming the source, the byte offset and the record type.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "sideband/perf_record.h"

namespace ptd {

// How the records of one source were produced (perf_event_attr of the event).
struct RecordFormat {
  uint64_t sample_type = kSidebandSampleType;
  bool sample_id_all = true;
};

class RecordReader {
 public:
  // `bytes` must outlive the reader. `source` names the file in error messages.
  RecordReader(absl::Span<const uint8_t> bytes, std::string source, RecordFormat format);

  // The next record, std::nullopt at the end, or an error. After an error the reader
  // stays at the bad record and returns the same error again (records have no sync
  // marker, so nothing after a corrupt header can be trusted).
  absl::StatusOr<std::optional<PerfRecord>> Next();

  // Offset of the next record to read.
  uint64_t offset() const { return offset_; }
  const std::string& source() const { return source_; }

 private:
  absl::Status Error(uint64_t at, uint32_t type, const std::string& what) const;

  absl::Span<const uint8_t> bytes_;
  std::string source_;
  RecordFormat format_;
  uint64_t offset_ = 0;
  absl::Status sticky_error_;
};

// What ReadAllRecords saw besides the records themselves.
struct RecordCounters {
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t other_records = 0;  // kept as OtherRecord (not modelled or unknown type)
  uint64_t unknown_type_records = 0;  // type not in perf_event.h as we know it
  std::map<uint32_t, uint64_t> by_type;
};

struct RecordList {
  std::vector<PerfRecord> records;
  RecordCounters counters;
  // OK when every byte parsed. Set only by ReadRecordsUpToError; ReadAllRecords returns
  // the error instead.
  absl::Status error;
};

// Every record of `bytes`, or the first error.
absl::StatusOr<RecordList> ReadAllRecords(absl::Span<const uint8_t> bytes,
                                          const std::string& source, RecordFormat format);
// Every record up to the first error, which is kept in RecordList::error (for `info`).
RecordList ReadRecordsUpToError(absl::Span<const uint8_t> bytes, const std::string& source,
                                RecordFormat format);

}  // namespace ptd
