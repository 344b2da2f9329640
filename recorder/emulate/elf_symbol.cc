#include "recorder/emulate/elf_symbol.h"

#include <elf.h>

#include <algorithm>

#include "absl/strings/str_format.h"
#include "image/elf_reader.h"
#include "image/mapped_file.h"

namespace ptd {

absl::StatusOr<ElfSymbolAddress> FindElfFunction(const std::string& path, const std::string& name) {
  absl::StatusOr<std::shared_ptr<const image::MappedFile>> file = image::MappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<image::ElfInfo> info = image::ReadElfInfo((*file)->bytes(), path);
  if (!info.ok()) return info.status();
  ElfSymbolAddress result;
  result.position_independent = info->position_independent;
  if (!info->segments.empty()) result.first_load_vaddr = info->segments.front().vaddr & ~0xfffull;
  // .symtab first: the walk visits it before .dynsym.
  bool found = false;
  absl::Status walked = image::ForEachElfSymbol((*file)->bytes(), path, [&](const image::ElfSymbol& symbol) {
    if (!found && symbol.type == STT_FUNC && symbol.name == name) {
      result.value = symbol.value;
      result.size = symbol.size;
      found = true;
    }
  });
  if (!walked.ok()) return walked;
  if (!found) {
    return absl::NotFoundError(absl::StrFormat("%s: no function symbol named '%s'", path, name));
  }
  result.file_offset = result.value;
  for (const image::ElfSegment& segment : info->segments) {
    if (result.value >= segment.vaddr && result.value < segment.vaddr + segment.file_size) {
      result.file_offset = result.value - segment.vaddr + segment.file_offset;
      break;
    }
  }
  return result;
}

absl::StatusOr<ElfCodeRange> FindElfCodeRange(const std::string& path) {
  absl::StatusOr<std::shared_ptr<const image::MappedFile>> file = image::MappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<image::ElfInfo> info = image::ReadElfInfo((*file)->bytes(), path);
  if (!info.ok()) return info.status();
  uint64_t begin = UINT64_MAX;
  uint64_t end = 0;
  for (const image::ElfSegment& segment : info->segments) {
    if (!segment.executable) continue;
    begin = std::min(begin, segment.file_offset);
    end = std::max(end, segment.file_offset + segment.file_size);
  }
  if (end <= begin) return absl::NotFoundError(absl::StrFormat("%s: no executable PT_LOAD segment", path));
  return ElfCodeRange{begin, end - begin};
}

}  // namespace ptd
