// DATA ring reader over arbitrary ring contents and head/tail positions (what a buggy or
// hostile producer could leave): never reads outside the buffer, never crashes, copies
// out only whole records, and always leaves data_tail == data_head.
#include <linux/perf_event.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "recorder/sideband/data_ring.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Layout of the input: u8 log2(ring size) (3..12), u64 tail, u16 head - tail, ring bytes.
  if (size < 11) return 0;
  size_t ring_size = size_t{1} << (3 + data[0] % 10);
  uint64_t tail;
  uint16_t distance;
  std::memcpy(&tail, data + 1, sizeof(tail));
  std::memcpy(&distance, data + 9, sizeof(distance));
  std::vector<uint8_t> ring(ring_size, 0);
  std::memcpy(ring.data(), data + 11, std::min(ring_size, size - 11));
  perf_event_mmap_page header;
  std::memset(&header, 0, sizeof(header));
  header.data_tail = tail;
  header.data_head = tail + distance;
  ptd::DataRing reader(&header, ring.data(), ring.size());
  std::string out;
  ptd::DataRingStats stats;
  (void)reader.Drain(&out, &stats);
  if (header.data_tail != header.data_head) std::abort();
  if (out.size() != stats.bytes || out.size() > distance) std::abort();
  // Whole records only: the sizes chain exactly to the end.
  size_t at = 0;
  while (at < out.size()) {
    perf_event_header h;
    if (out.size() - at < sizeof(h)) std::abort();
    std::memcpy(&h, out.data() + at, sizeof(h));
    if (h.size < sizeof(h)) std::abort();
    at += h.size;
  }
  if (at != out.size()) std::abort();
  return 0;
}
