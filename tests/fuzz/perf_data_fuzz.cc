// perf.data reader: any bytes give a PerfData or an error, never a crash; every record
// and AUXTRACE payload it reports lies inside the input, and building meta.json from
// what parsed never crashes either.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "perfdata/perf_data_reader.h"
#include "perfdata/perf_importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  absl::StatusOr<ptd::perfdata::PerfData> parsed = ptd::perfdata::PerfDataReader::Parse(bytes, "fuzz.data");
  if (!parsed.ok()) return 0;
  for (const auto& rec : parsed->records) {
    if (rec.file_offset + rec.size > size || rec.size < 8) std::abort();
  }
  for (const auto& buf : parsed->aux_buffers) {
    if (buf.payload_offset > size || buf.size > size - buf.payload_offset) std::abort();
  }
  (void)ptd::perfdata::PerfDataToMeta(*parsed);
  return 0;
}
