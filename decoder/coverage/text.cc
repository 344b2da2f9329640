#include "decoder/coverage/text.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "decoder/coverage/lines.h"

namespace ptd::decoder {

std::string CoverageText(const CoverageCollector& coverage) {
  struct Figures {
    uint64_t blocks = 0;
    uint64_t instructions = 0;
    uint64_t bytes = 0;
    uint64_t hits = 0;
  };
  const std::vector<CoveredBlock> blocks = coverage.Blocks();
  std::map<uint32_t, Figures> by_module;
  std::map<uint32_t, std::map<std::string, Figures>> by_function;  // per module, by name
  for (const CoveredBlock& b : blocks) {
    for (Figures* f : {&by_module[b.module], &by_function[b.module][coverage.functions()[b.function]]}) {
      ++f->blocks;
      f->instructions += b.instructions;
      f->bytes += b.size;
      f->hits += b.hits;
    }
  }
  const std::vector<ModuleLines> lines = CoverageLines(coverage);
  std::string out;
  absl::StrAppendFormat(&out, "%d modules, %d blocks executed\n", by_module.size(), blocks.size());
  for (const auto& [id, m] : by_module) {
    const CoverageModule& module = coverage.modules()[id];
    const ModuleLines& module_lines = lines[id];
    absl::StrAppendFormat(&out, "\n%s (base 0x%x): %d blocks, %d instructions, %d bytes of code executed", module.name,
                          module.base, m.blocks, m.instructions, m.bytes);
    if (module_lines.missing.empty()) {
      absl::StrAppendFormat(&out, "; %d source lines executed\n", module_lines.hits.size());
    } else {
      absl::StrAppendFormat(&out, "; no source lines (%s)\n", module_lines.missing);
    }
    absl::StrAppendFormat(&out, "  %8s %12s %14s %8s  %s\n", "blocks", "instructions", "block runs", "lines", "function");
    for (const auto& [name, f] : by_function[id]) {
      auto function_lines = module_lines.functions.find(name);
      const std::string executed_lines = function_lines == module_lines.functions.end()
                                             ? "-"
                                             : absl::StrCat(function_lines->second.lines_executed);
      absl::StrAppendFormat(&out, "  %8d %12d %14d %8s  %s\n", f.blocks, f.instructions, f.hits, executed_lines, name);
    }
  }
  return out;
}

}  // namespace ptd::decoder
