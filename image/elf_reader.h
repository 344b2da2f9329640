#pragma once
// What the decoder and the recorder need from an ELF file, read with libelf: loadable
// segments (to place a mapping's file offset in the ELF's own address space), the GNU
// build-id, where its separate debug file is (.gnu_debuglink), and the one walk over its
// symbols (.symtab, .dynsym, MiniDebugInfo in .gnu_debugdata, PLT stubs as name@plt).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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
  bool has_minidebuginfo = false;  // .gnu_debugdata present
  bool is_elf64 = true;
  bool position_independent = false;  // ET_DYN: loaded at a bias
  uint64_t entry = 0;                 // e_entry, 0 when none
  std::string debuglink;              // file name in .gnu_debuglink, "" when none
};

// One defined symbol with a name, as the walk over an ELF's symbol tables sees it.
struct ElfSymbol {
  absl::string_view name;  // mangled, as in the string table
  uint64_t value = 0;      // st_value
  uint64_t size = 0;       // st_size (0 for most assembly labels)
  int type = 0;            // STT_FUNC, STT_NOTYPE, ...
  int binding = 0;         // STB_GLOBAL, STB_LOCAL, STB_WEAK, ...
  bool in_code = false;    // defined in an executable section
  bool dynamic = false;    // from .dynsym (else .symtab)
};

// The loadable segment whose bytes a code mapping of the file bytes [file_offset,
// file_offset + size) holds, or nullptr. Loaders map each segment from its page-aligned
// file offset, so a mapping can also hold the tail of the segment before it: lld and mold
// pack segments into shared pages (text at file offset 0x690, address 0x1690, mapped from
// offset 0 like the read-only segment before it). Of the segments the mapping holds bytes
// of, the executable one is the mapping's: the one holding its first byte when that one is
// executable, else the one it holds most of (the one holding its first byte when none is).
const ElfSegment* SegmentOfCodeMapping(const ElfInfo& info, uint64_t file_offset, uint64_t size);

// True when `bytes` starts with the ELF magic.
bool LooksLikeElf(absl::Span<const uint8_t> bytes);

// `path` names the file in errors only.
absl::StatusOr<ElfInfo> ReadElfInfo(absl::Span<const uint8_t> bytes, const std::string& path);

// Calls `visit` for every defined, named, non-zero symbol of .symtab and .dynsym (the
// only walk over ELF symbol tables in the project). MiniDebugInfo is not included.
absl::Status ForEachElfSymbol(absl::Span<const uint8_t> bytes, const std::string& path,
                              absl::FunctionRef<void(const ElfSymbol&)> visit);

// True for what names code: functions, and labels in code without a type (assembly
// entry points such as _start and _dl_start_user).
bool IsCodeSymbol(const ElfSymbol& symbol);

// Adds the code symbols of .symtab, .dynsym and MiniDebugInfo (.gnu_debugdata, an
// xz-compressed ELF with a .symtab, as Fedora and others ship) and the PLT stubs to
// `table` (in ELF addresses). Does not call Finish().
absl::Status ReadElfSymbols(absl::Span<const uint8_t> bytes, const std::string& path,
                            SymbolTable* table);

// The code an FDE of the unwind table describes: one function (or a part of one).
struct FdeRange {
  uint64_t start = 0;
  uint64_t end = 0;  // exclusive
};
// Every FDE's range, from the unwind table's index (.eh_frame_hdr) and .eh_frame, in ELF
// addresses, sorted by start: what still bounds functions in a stripped file. Empty when
// the file has no index or uses encodings other than the linkers' (4-byte, relative).
std::vector<FdeRange> ReadFdeRanges(absl::Span<const uint8_t> bytes, const std::string& path);

// Where a separate debug file for `build_id` lives: /usr/lib/debug/.build-id/xx/rest.debug.
std::string DebugFileForBuildId(const std::string& build_id,
                                const std::string& debug_root = "/usr/lib/debug");

// Where gdb looks for the .gnu_debuglink file `debuglink` of the ELF at `path`, in order:
// next to it, in .debug/ next to it, and under `debug_root` by its directory.
std::vector<std::string> DebugFilesForDebuglink(const std::string& path, const std::string& debuglink,
                                                const std::string& debug_root = "/usr/lib/debug");

}  // namespace ptd::image
