#pragma once
// The source lines a coverage executed, per module, from its DWARF line table
// (image/line_table.h): what `coverage --format lcov` writes and `--format text` counts.
// An instruction's count is the runs of the blocks holding it; a line's, its most
// executed instruction's (as gcov counts a line); a function's, its first executed
// instruction's (its entry, for a function entered at its start).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "decoder/coverage/collector.h"
#include "image/line_table.h"

namespace ptd::decoder {

struct ModuleLines {
  std::string missing;  // why the module has no lines ("" when it has)
  std::vector<std::string> files;        // the line table's source files
  std::vector<image::SourceLine> lines;  // every line with code, by file and line
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> hits;  // (file, line) -> count, executed lines only
  struct Function {
    uint64_t address = UINT64_MAX;  // ELF address of its first executed instruction
    uint64_t hits = 0;
    std::optional<image::SourceLine> line;
    size_t lines_executed = 0;
  };
  std::map<std::string, Function> functions;  // the functions that ran
};

// One per module of `coverage`, in its order.
std::vector<ModuleLines> CoverageLines(const CoverageCollector& coverage);

}  // namespace ptd::decoder
