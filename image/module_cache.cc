#include "image/module_cache.h"

#include <algorithm>

#include "common/file_util.h"

namespace ptd::image {
namespace {

// The entry point is where every program starts; when no symbol names it (stripped
// executables, a loader without its debug file) it is `_start` all the same, over the
// unwind table's range for it, else up to the next function a symbol or the unwind table
// knows. With none of these its end is unknown and it stays unnamed rather than take a
// guessed size.
void NameEntryPoint(uint64_t entry, const std::vector<FdeRange>& fde_ranges, SymbolTable* symbols) {
  if (entry == 0) return;
  uint64_t end = ~uint64_t{0};
  for (const Symbol& symbol : symbols->symbols()) {
    if (symbol.start == entry) return;
    if (symbol.start > entry) end = std::min(end, symbol.start);
  }
  for (const FdeRange& fde : fde_ranges) {
    if (fde.start == entry) end = std::min(end, fde.end);
    if (fde.start > entry) end = std::min(end, fde.start);
  }
  if (end == ~uint64_t{0}) return;
  symbols->Add(entry, end - entry, "_start");
}

}  // namespace

std::vector<std::string> ModuleCache::SeparateDebugFiles(const std::string& path, const std::string& original_path,
                                                         const ElfInfo& info) const {
  std::vector<std::string> candidates;
  // The trace archive keeps a fetched debug file next to its copy (recorder/images/trace_archive.h).
  candidates.push_back(path + ".debug");
  if (!info.build_id.empty()) candidates.push_back(DebugFileForBuildId(info.build_id, debug_root_));
  for (const std::string* where : {&path, &original_path}) {
    if (where->empty() || (where == &original_path && original_path == path)) continue;
    for (std::string& file : DebugFilesForDebuglink(*where, info.debuglink, debug_root_)) {
      candidates.push_back(std::move(file));
    }
  }
  return candidates;
}

void ModuleCache::AddDebuginfodSymbols(Module* module, const std::string& shown_path) {
  if (debuginfod_ == nullptr || module->elf.build_id.empty()) return;
  absl::StatusOr<std::string> debug = debuginfod_->Fetch(module->elf.build_id, shown_path);
  if (!debug.ok()) return;  // not found, or the one warning is the fetcher's
  absl::StatusOr<std::shared_ptr<const MappedFile>> debug_file = MappedFile::Open(*debug);
  absl::Status read = debug_file.ok() ? ReadElfSymbols((*debug_file)->bytes(), *debug, &module->symbols)
                                      : debug_file.status();
  if (!read.ok()) {
    debuginfod_->RejectFetched(shown_path, *debug, std::string(read.message()));
    return;
  }
  module->symbols_from = *debug;
  module->symbols_from_debuginfod = true;
}

absl::StatusOr<std::shared_ptr<const Module>> ModuleCache::Get(const std::string& path,
                                                              const std::string& original_path) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = modules_.find(path);
  if (it != modules_.end()) return it->second;
  absl::StatusOr<std::shared_ptr<const Module>> module = Load(path, original_path);
  if (!module.ok()) return module.status();
  modules_.emplace(path, *module);
  return *module;
}

absl::StatusOr<std::shared_ptr<const Module>> ModuleCache::Load(const std::string& path,
                                                               const std::string& original_path) {
  auto module = std::make_shared<Module>();
  module->path = path;
  absl::StatusOr<std::shared_ptr<const MappedFile>> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  module->file = *file;
  if (LooksLikeElf(module->file->bytes())) {
    absl::StatusOr<ElfInfo> info = ReadElfInfo(module->file->bytes(), path);
    if (info.ok()) {
      module->is_elf = true;
      module->elf = *info;
      // A stripped file keeps only .dynsym (and maybe MiniDebugInfo); the separate
      // debug file has the rest.
      if (!info->has_symtab) {
        for (const std::string& debug : SeparateDebugFiles(path, original_path, *info)) {
          if (debug == path || !PathExists(debug)) continue;
          absl::StatusOr<std::shared_ptr<const MappedFile>> debug_file = MappedFile::Open(debug);
          if (debug_file.ok() && ReadElfSymbols((*debug_file)->bytes(), debug, &module->symbols).ok()) {
            module->symbols_from = debug;
            break;
          }
        }
      }
      if (!info->has_symtab && module->symbols_from.empty() && !info->has_minidebuginfo) {
        AddDebuginfodSymbols(module.get(), original_path.empty() ? path : original_path);
      }
      // .dynsym, MiniDebugInfo and the PLT come from the file itself either way.
      (void)ReadElfSymbols(module->file->bytes(), path, &module->symbols);
      if (module->symbols_from.empty()) module->symbols_from = path;
      if (!info->has_symtab && module->symbols_from == path) {
        module->fde_ranges = ReadFdeRanges(module->file->bytes(), path);
      }
      NameEntryPoint(info->entry, module->fde_ranges, &module->symbols);
      if (inlined_frames_) {
        // The file's own DWARF, else the debug file its symbols came from.
        for (const std::string& debug : {path, module->symbols_from}) {
          absl::StatusOr<std::unique_ptr<InlineTable>> table = InlineTable::Open(debug);
          if (table.ok()) {
            module->inlines = std::move(*table);
            break;
          }
          if (module->symbols_from == path) break;
        }
      }
    }
  }
  module->symbols.Finish();
  for (const Symbol& sym : module->symbols.symbols()) {
    if (module->symbols.name(sym) == "caml_start_program") module->ocaml = true;
  }
  return std::shared_ptr<const Module>(std::move(module));
}

}  // namespace ptd::image
