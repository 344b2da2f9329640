#include "recorder/pt/psb_trim.h"

#include <algorithm>
#include <memory>

#include "common/pt_psb.h"
#include "common/trace_dir.h"
#include "image/mapped_file.h"
#include "recorder/session/stream_cut.h"

namespace ptd::pt {
namespace {

// The file offset of the last PSB of `stream` timed at or before `from_ns`; 0 when none.
uint64_t LastPsbAtOrBefore(absl::Span<const uint8_t> file, const PtStream& stream, uint64_t from_ns,
                           const TimeConversion& conversion) {
  uint64_t cut = 0;
  for (const PtChunk& chunk : stream.chunks) {
    if (chunk.file_offset >= file.size()) break;
    // Chunk by chunk: a snapshot or a truncation leaves a gap between two chunks, and a
    // PSB+ never spans one.
    const uint64_t size = std::min<uint64_t>(chunk.size, file.size() - chunk.file_offset);
    for (const PsbTsc& psb : FindPsbsWithTsc(file.subspan(chunk.file_offset, size))) {
      if (!psb.tsc) continue;  // untimed: cannot say which side it is on
      if (conversion.TscToNs(*psb.tsc) > from_ns) return cut;
      cut = chunk.file_offset + psb.offset;
    }
  }
  return cut;
}

}  // namespace

absl::StatusOr<PsbTrimResult> TrimStreamsAtPsb(const std::string& dir, uint64_t from_ns, TraceMeta* meta) {
  PsbTrimResult result;
  for (PtStream& stream : meta->streams) {
    const std::string path = ResolveTracePath(dir, stream.file);
    absl::StatusOr<std::shared_ptr<const image::MappedFile>> file = image::MappedFile::Open(path);
    if (!file.ok()) return file.status();
    const uint64_t cut = LastPsbAtOrBefore((*file)->bytes(), stream, from_ns, meta->time);
    if (cut == 0) {
      ++result.streams_whole;
      continue;
    }
    if (absl::Status st = CutStreamFile(path, cut, &stream.chunks); !st.ok()) return st;
    ++result.streams_cut;
    result.bytes_dropped += cut;
  }
  return result;
}

}  // namespace ptd::pt
