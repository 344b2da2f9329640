#pragma once
// Address → function lookup over one module's symbols: a sorted array searched by binary
// search. Names are kept demangled in one string arena so lookups allocate nothing.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ptd::image {

struct Symbol {
  uint64_t start = 0;  // in the module's own address space (ELF st_value, JIT address)
  uint64_t end = 0;    // exclusive
  uint32_t name_offset = 0;
  uint32_t name_size = 0;
  bool plt = false;    // a PLT stub: callers are attributed to the jump target
  bool local = false;  // a file-local alias (fib.localalias, __GI_memcpy): loses to a global name
  // A part the compiler split off a function (foo.cold, foo.cold.1, "foo() [clone .cold]"):
  // the start of that function; 0 for whole functions.
  uint64_t parent_start = 0;
};

class SymbolTable {
 public:
  // Adds a symbol; `size` 0 means "until the next symbol". `name` is demangled here.
  // `local`: an ELF STB_LOCAL symbol; of aliases (same start and size) a global one names
  // the code, as the name its author exported.
  void Add(uint64_t start, uint64_t size, absl::string_view name, bool plt = false, bool local = false);
  // Sorts, drops duplicates, sizes zero-sized symbols and links split-off parts to their
  // function. Call once after the last Add.
  void Finish();

  // The innermost symbol containing `address`, or nullptr.
  const Symbol* Find(uint64_t address) const;
  absl::string_view name(const Symbol& symbol) const {
    return absl::string_view(names_).substr(symbol.name_offset, symbol.name_size);
  }
  size_t size() const { return symbols_.size(); }
  const std::vector<Symbol>& symbols() const { return symbols_; }

 private:
  void LinkSplitParts();

  std::vector<Symbol> symbols_;
  std::string names_;
};

}  // namespace ptd::image
