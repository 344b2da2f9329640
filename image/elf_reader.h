#pragma once
// What the decoder needs from an ELF file, read with libelf: loadable segments (to place
// a mapping's file offset in the ELF's own address space), the GNU build-id, and
// function symbols (.symtab, .dynsym, PLT stubs as name@plt).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "image/symbol_table.h"

namespace ptd::image {

struct ElfSegment {
  uint64_t vaddr = 0;
  uint64_t file_offset = 0;
  uint64_t file_size = 0;
  bool executable = false;
};

struct ElfInfo {
  std::string build_id;  // lower-case hex, empty when the file has no NT_GNU_BUILD_ID
  std::vector<ElfSegment> segments;
  bool has_symtab = false;  // full symbol table present (not stripped)
  bool is_elf64 = true;
};

// True when `bytes` starts with the ELF magic.
bool LooksLikeElf(absl::Span<const uint8_t> bytes);

// `path` names the file in errors only.
absl::StatusOr<ElfInfo> ReadElfInfo(absl::Span<const uint8_t> bytes, const std::string& path);

// Adds function symbols of .symtab and .dynsym and the PLT stubs to `table` (in ELF
// addresses). Does not call Finish().
absl::Status ReadElfSymbols(absl::Span<const uint8_t> bytes, const std::string& path,
                            SymbolTable* table);

// Where a separate debug file for `build_id` lives: /usr/lib/debug/.build-id/xx/rest.debug.
std::string DebugFileForBuildId(const std::string& build_id,
                                const std::string& debug_root = "/usr/lib/debug");

}  // namespace ptd::image
