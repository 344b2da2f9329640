#pragma once
// Files that code is mapped from, loaded once per decode and shared by every process
// image: the mapped bytes (for instruction classification), ELF facts and symbols.
// Thread-safe, so streams decoded on separate threads can share it.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "image/debuginfod_fetcher.h"
#include "image/elf_reader.h"
#include "image/inline_table.h"
#include "image/mapped_file.h"
#include "image/symbol_table.h"

namespace ptd::image {

struct Module {
  std::string path;
  std::shared_ptr<const MappedFile> file;
  bool is_elf = false;
  ElfInfo elf;           // valid when is_elf
  SymbolTable symbols;   // ELF addresses; empty for raw dumps
  std::string symbols_from;  // the file symbols were read from (a separate debug file)
  bool symbols_from_debuginfod = false;  // symbols_from was fetched from a debuginfod server
  bool ocaml = false;        // holds OCaml native code (has caml_start_program)
  // No full symbol table: its functions' ranges from the unwind table (ELF addresses,
  // sorted), which split the code between symbols into one unnamed function each.
  std::vector<FdeRange> fde_ranges;
  // The functions and inlined calls of its DWARF (its own, else its separate debug
  // file's); nullptr without DWARF or with inlined frames off.
  std::shared_ptr<const InlineTable> inlines;
};

class ModuleCache {
 public:
  // `debug_root` is where separate debug files are looked up by build-id and debuglink.
  explicit ModuleCache(std::string debug_root = "/usr/lib/debug") : debug_root_(std::move(debug_root)) {}

  // Loads `path` on first use. `original_path`: where the traced process had the file
  // when `path` is a copy of it (the trace's archive); its .gnu_debuglink is looked up
  // next to the original as well.
  absl::StatusOr<std::shared_ptr<const Module>> Get(const std::string& path, const std::string& original_path = "");

  // Debug files of stripped files with no local debug info (neither a separate debug file
  // nor MiniDebugInfo) are fetched by build-id through `fetcher`. Call before the first Get.
  void SetDebuginfod(std::unique_ptr<DebuginfodFetcher> fetcher) { debuginfod_ = std::move(fetcher); }
  // Inlined frames and source locations from DWARF (Module::inlines); on unless turned
  // off before the first Get.
  void SetInlinedFrames(bool on) { inlined_frames_ = on; }
  // nullptr when debuginfod is off. Its warnings and summary are read after the decode.
  const DebuginfodFetcher* debuginfod() const { return debuginfod_.get(); }

 private:
  absl::StatusOr<std::shared_ptr<const Module>> Load(const std::string& path, const std::string& original_path);
  // Where the separate debug file of a stripped `path` may be, most specific first.
  std::vector<std::string> SeparateDebugFiles(const std::string& path, const std::string& original_path,
                                              const ElfInfo& info) const;

  // Reads the symbols of the debug file debuginfod has for the stripped `module`, if any;
  // `shown_path` names the file in messages.
  void AddDebuginfodSymbols(Module* module, const std::string& shown_path);

  std::string debug_root_;
  std::unique_ptr<DebuginfodFetcher> debuginfod_;
  bool inlined_frames_ = true;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Module>> modules_;
};

}  // namespace ptd::image
