#pragma once
// The DWARF line table of one ELF file (elfutils' libdw): which source line each
// instruction address belongs to (`coverage --format lcov`).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptd::image {

struct SourceLine {
  uint32_t file = 0;  // index into LineTable::files()
  uint32_t line = 0;
};

class LineTable {
 public:
  // Reads every compilation unit's line table of `path` (the file itself or its separate
  // debug file). NotFound when it has no line table; other errors name the file.
  static absl::StatusOr<LineTable> Load(const std::string& path);

  // The line of the instruction at ELF address `address`; none outside the table.
  std::optional<SourceLine> Find(uint64_t address) const;
  // Source files (as DWARF names them, with the compilation directory when relative).
  const std::vector<std::string>& files() const { return files_; }
  // Every (file, line) the table has an address for: the lines code was generated for.
  std::vector<SourceLine> Lines() const;

 private:
  struct Row {
    uint64_t address = 0;
    uint32_t file = 0;
    uint32_t line = 0;
    bool end_sequence = false;  // first address after a sequence: no line
  };
  std::vector<Row> rows_;  // by address
  std::vector<std::string> files_;
};

}  // namespace ptd::image
