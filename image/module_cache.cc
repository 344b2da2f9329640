#include "image/module_cache.h"

#include "common/file_util.h"

namespace ptd::image {

absl::StatusOr<std::shared_ptr<const Module>> ModuleCache::Get(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = modules_.find(path);
  if (it != modules_.end()) return it->second;
  absl::StatusOr<std::shared_ptr<const Module>> module = Load(path);
  if (!module.ok()) return module.status();
  modules_.emplace(path, *module);
  return *module;
}

absl::StatusOr<std::shared_ptr<const Module>> ModuleCache::Load(const std::string& path) {
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
      // A stripped file keeps only .dynsym; the distribution's debug file has the rest.
      bool loaded_debug = false;
      if (!info->has_symtab && !info->build_id.empty()) {
        std::string debug = DebugFileForBuildId(info->build_id, debug_root_);
        if (PathExists(debug)) {
          absl::StatusOr<std::shared_ptr<const MappedFile>> debug_file = MappedFile::Open(debug);
          if (debug_file.ok() &&
              ReadElfSymbols((*debug_file)->bytes(), debug, &module->symbols).ok()) {
            module->symbols_from = debug;
            loaded_debug = true;
          }
        }
      }
      // .dynsym and the PLT come from the file itself either way.
      (void)ReadElfSymbols(module->file->bytes(), path, &module->symbols);
      if (!loaded_debug) module->symbols_from = path;
    }
  }
  module->symbols.Finish();
  for (const Symbol& sym : module->symbols.symbols()) {
    if (module->symbols.name(sym) == "caml_start_program") module->ocaml = true;
  }
  return std::shared_ptr<const Module>(std::move(module));
}

}  // namespace ptd::image
