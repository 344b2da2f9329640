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
};

absl::StatusOr<ElfSymbolAddress> FindElfFunction(const std::string& path, const std::string& name);

}  // namespace ptd
