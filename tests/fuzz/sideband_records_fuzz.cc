// Sideband record parser: any bytes give records or an error naming an offset, never a
// crash or an out-of-bounds read; every record that parses re-encodes (RecordBuilder) to
// bytes that parse back to the same record. The first byte picks the sample_id format.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "absl/types/span.h"
#include "sideband/record_builder.h"
#include "sideband/record_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  // The six sample_type bits that shape the trailer, and sample_id_all.
  const uint64_t bits[] = {ptd::kPerfSampleTid, ptd::kPerfSampleTime, ptd::kPerfSampleId,
                           ptd::kPerfSampleStreamId, ptd::kPerfSampleCpu,
                           ptd::kPerfSampleIdentifier};
  ptd::RecordFormat format;
  format.sample_type = 0;
  for (int i = 0; i < 6; ++i) {
    if (selector & (1u << i)) format.sample_type |= bits[i];
  }
  format.sample_id_all = (selector & 0x40) == 0;
  absl::Span<const uint8_t> bytes(data + 1, size - 1);
  ptd::RecordList list = ptd::ReadRecordsUpToError(bytes, "fuzz", format);
  if (list.error.ok() != (list.counters.bytes == bytes.size())) std::abort();
  for (const ptd::PerfRecord& record : list.records) {
    if (record.size > 60000) continue;  // the builder caps very long strings
    std::vector<uint8_t> again = ptd::EncodeRecord(record, format);
    absl::StatusOr<ptd::RecordList> back = ptd::ReadAllRecords(again, "again", format);
    if (!back.ok() || back->records.size() != 1) std::abort();
    const ptd::PerfRecord& copy = back->records[0];
    if (!(copy.body == record.body) || copy.type != record.type) std::abort();
    if (format.sample_id_all && ptd::RecordHasSampleIdTrailer(record.type) &&
        std::holds_alternative<ptd::OtherRecord>(record.body) == false &&
        !(copy.sample_id == record.sample_id)) {
      std::abort();
    }
  }
  return 0;
}
