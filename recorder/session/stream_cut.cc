#include "recorder/session/stream_cut.h"

#include <algorithm>
#include <memory>

#include "common/file_util.h"
#include "image/mapped_file.h"

namespace ptd {

absl::Status CutStreamFile(const std::string& path, uint64_t cut, std::vector<PtChunk>* chunks) {
  if (cut == 0) return absl::OkStatus();
  // Mapped, not read: a hardware stream may be larger than memory allows to copy.
  absl::StatusOr<std::shared_ptr<const image::MappedFile>> file = image::MappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::Span<const uint8_t> bytes = (*file)->bytes();
  cut = std::min<uint64_t>(cut, bytes.size());
  std::vector<PtChunk> kept;
  for (PtChunk chunk : *chunks) {
    if (chunk.file_offset + chunk.size <= cut) continue;
    if (chunk.file_offset < cut) {
      chunk.size -= cut - chunk.file_offset;
      chunk.aux_offset += cut - chunk.file_offset;
      chunk.file_offset = cut;
    }
    chunk.lost_before = chunk.lost_before || kept.empty();
    chunk.file_offset -= cut;
    kept.push_back(chunk);
  }
  if (absl::Status st = WriteFileAtomic(path, bytes.subspan(cut)); !st.ok()) return st;
  *chunks = std::move(kept);
  return absl::OkStatus();
}

}  // namespace ptd
