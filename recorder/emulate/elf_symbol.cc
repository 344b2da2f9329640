#include "recorder/emulate/elf_symbol.h"

#include <elf.h>

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
      found = true;
    }
  });
  if (!walked.ok()) return walked;
  if (!found) {
    return absl::NotFoundError(absl::StrFormat("%s: no function symbol named '%s'", path, name));
  }
  return result;
}

}  // namespace ptd
