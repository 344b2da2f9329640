#include "recorder/images/elf_symbol.h"

#include <elf.h>

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "image/elf_reader.h"
#include "image/mapped_file.h"
#include "recorder/sideband/proc_maps.h"

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

SymbolSpec ParseSymbolSpec(const std::string& symbol) {
  SymbolSpec spec;
  spec.name = symbol;
  if (const size_t at = symbol.find('@'); at != std::string::npos) {
    spec.name = symbol.substr(0, at);
    spec.file_suffix = symbol.substr(at + 1);
  }
  return spec;
}

uint64_t SymbolRuntimeAddress(const ElfSymbolAddress& symbol, uint64_t first_load_start) {
  return symbol.position_independent ? first_load_start - symbol.first_load_vaddr + symbol.value : symbol.value;
}

absl::StatusOr<uint64_t> ResolveSymbolInProcess(int pid, const std::string& symbol) {
  const SymbolSpec spec = ParseSymbolSpec(symbol);
  absl::StatusOr<std::vector<ProcMapping>> maps = ReadProcMaps(pid);
  if (!maps.ok()) return maps.status();
  // The lowest mapping of each file tells where its first PT_LOAD landed. /proc lists
  // mappings by address; the main executable is normally first.
  std::vector<std::string> order;
  std::map<std::string, uint64_t> lowest_start;
  for (const ProcMapping& m : *maps) {
    if (m.path.empty() || m.special()) continue;
    auto [it, inserted] = lowest_start.emplace(m.path, m.start);
    if (inserted) order.push_back(m.path);
    if (m.pgoff == 0 && m.start < it->second) it->second = m.start;
  }
  std::vector<std::string> tried;
  for (const std::string& path : order) {
    if (!spec.file_suffix.empty() && !absl::EndsWith(path, spec.file_suffix)) continue;
    absl::StatusOr<ElfSymbolAddress> sym = FindElfFunction(path, spec.name);
    if (!sym.ok()) {
      tried.push_back(path);
      continue;
    }
    return SymbolRuntimeAddress(*sym, lowest_start[path]);
  }
  return absl::NotFoundError(absl::StrCat("--trigger: symbol \"", spec.name, "\" not found in the ",
                                          tried.size(), " files mapped by process ", pid,
                                          spec.file_suffix.empty() ? "" : " matching @", spec.file_suffix));
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
