// Ground truth reader (recorder/emulate/ground_truth.h): any bytes give records or an
// error naming the offset, never a crash, a hang or unbounded memory.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "recorder/emulate/ground_truth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  absl::StatusOr<ptd::GroundTruthReader> reader =
      ptd::GroundTruthReader::FromBytes(std::move(bytes), "fuzz/truth.bin");
  if (!reader.ok()) return 0;
  ptd::GroundTruthRecord record;
  // Every record consumes at least one byte, or one varint of a run: bounded by size.
  for (size_t i = 0; i <= size * 2 + 2; ++i) {
    absl::StatusOr<bool> more = reader->Next(&record);
    if (!more.ok() || !*more) return 0;
  }
  std::abort();  // more records than bytes allow: the reader is not making progress
}
