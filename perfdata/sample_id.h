#pragma once
// The sample_id trailer that sample_id_all appends to every non-SAMPLE kernel record:
// { pid, tid } if TID, time if TIME, id if ID, stream_id if STREAM_ID, { cpu, res } if
// CPU, id if IDENTIFIER, in that order (perf_event.h). Its size depends only on the
// attr's sample_type, so a record's body ends where the trailer begins.

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "sideband/perf_record.h"

namespace ptd::perfdata {

// SampleId, its size (SampleIdSize) and its layout are sideband's (sideband/perf_record.h).

// Parses the trailer at the end of `record` (header included). Returns false when the
// record is shorter than header + trailer. Fields the sample_type lacks stay 0, their
// has_* flag false.
bool ParseSampleIdTrailer(absl::Span<const uint8_t> record, uint64_t sample_type, SampleId* out);

// Appends a trailer for `sample_type` to `out`.
void AppendSampleId(const SampleId& id, uint64_t sample_type, std::string* out);

// Offset of the id in a PERF_RECORD_SAMPLE body-with-header, or -1 when the sample_type
// has neither IDENTIFIER nor ID.
int SampleRecordIdOffset(uint64_t sample_type);

}  // namespace ptd::perfdata
