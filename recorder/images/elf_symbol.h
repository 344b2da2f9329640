#pragma once
// Finds a function's address in an ELF file (symtab, else dynsym), for `--start-at
// SYMBOL` and breakpoint triggers: the runtime address is the symbol value plus the load
// bias of the mapping (position-independent executables).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ptd {

struct ElfSymbolAddress {
  uint64_t value = 0;        // st_value
  bool position_independent = false;  // ET_DYN: add the load bias
  uint64_t first_load_vaddr = 0;      // p_vaddr of the first PT_LOAD, page-aligned down
  uint64_t size = 0;                  // st_size
  uint64_t file_offset = 0;           // where st_value lies in the file (its PT_LOAD)
};

absl::StatusOr<ElfSymbolAddress> FindElfFunction(const std::string& path, const std::string& name);

// A symbol as the user names it for --trigger / --start-at: "NAME", or "NAME@PATH-SUFFIX"
// to pick the file.
struct SymbolSpec {
  std::string name;
  std::string file_suffix;  // empty: any file
};
SymbolSpec ParseSymbolSpec(const std::string& symbol);

// Where `symbol` runs when its file's first PT_LOAD was mapped at `first_load_start`.
uint64_t SymbolRuntimeAddress(const ElfSymbolAddress& symbol, uint64_t first_load_start);

// The runtime address of `symbol` in process `pid`: looked up in each file the process
// has mapped (main executable first), plus the load bias of that file. Every backend
// resolves --trigger and --start-at this way.
absl::StatusOr<uint64_t> ResolveSymbolInProcess(int pid, const std::string& symbol);

// The file bytes [offset, offset + size) that executable PT_LOAD segments map.
struct ElfCodeRange {
  uint64_t file_offset = 0;
  uint64_t size = 0;
};
absl::StatusOr<ElfCodeRange> FindElfCodeRange(const std::string& path);

}  // namespace ptd
