#include "decoder/coverage/lines.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "image/insn_classifier.h"

namespace ptd::decoder {
namespace {

// The ELF address of file offset `offset`, through the loadable segment holding it.
std::optional<uint64_t> ElfAddressOf(const image::ElfInfo& elf, uint64_t offset) {
  for (const image::ElfSegment& s : elf.segments) {
    if (offset >= s.file_offset && offset < s.file_offset + s.file_size) return s.vaddr + (offset - s.file_offset);
  }
  return std::nullopt;
}

}  // namespace

std::vector<ModuleLines> CoverageLines(const CoverageCollector& coverage) {
  const std::vector<CoveredBlock> blocks = coverage.Blocks();  // by module
  std::vector<ModuleLines> out(coverage.modules().size());
  size_t first = 0;
  for (size_t m = 0; m < coverage.modules().size(); ++m) {
    size_t end = first;
    while (end < blocks.size() && blocks[end].module == m) ++end;
    const size_t begin = first;
    first = end;
    const CoverageModule& module = coverage.modules()[m];
    ModuleLines& result = out[m];
    if (module.module == nullptr || !module.module->is_elf) {
      result.missing = "not an ELF file";
      continue;
    }
    const image::Module& elf = *module.module;
    absl::StatusOr<image::LineTable> table =
        image::LineTable::Load(elf.symbols_from.empty() ? elf.path : elf.symbols_from);
    if (!table.ok()) {
      result.missing = std::string(table.status().message());
      continue;
    }
    // Each instruction's runs: the blocks holding it summed (a loop's condition is in the
    // block entered from before the loop and in the one falling through from its body).
    std::map<uint64_t, std::pair<uint64_t, uint32_t>> instructions;  // file offset -> (runs, function)
    const absl::Span<const uint8_t> bytes = elf.file->bytes();
    for (size_t i = begin; i < end; ++i) {
      const CoveredBlock& b = blocks[i];
      uint64_t at = b.offset;
      while (at < b.offset + b.size && at < bytes.size()) {
        const image::InsnInfo insn =
            image::InsnClassifier::Decode(at, bytes.subspan(at, std::min<size_t>(15, bytes.size() - at)));
        if (insn.size == 0) break;
        auto& [runs, function] = instructions[at];
        runs += b.hits;
        function = b.function;
        at += insn.size;
      }
    }
    std::map<std::string, std::set<std::pair<uint32_t, uint32_t>>> function_lines;
    for (const auto& [offset, counted] : instructions) {
      const std::optional<uint64_t> address = ElfAddressOf(elf.elf, offset);
      if (!address) continue;
      const std::optional<image::SourceLine> line = table->Find(*address);
      const std::string& name = coverage.functions()[counted.second];
      if (line) {
        uint64_t& hits = result.hits[{line->file, line->line}];
        hits = std::max(hits, counted.first);
        function_lines[name].insert({line->file, line->line});
      }
      ModuleLines::Function& f = result.functions[name];
      if (*address < f.address) {
        f.address = *address;
        f.hits = counted.first;
        f.line = line;
      }
    }
    for (auto& [name, f] : result.functions) f.lines_executed = function_lines[name].size();
    result.files = table->files();
    result.lines = table->Lines();
  }
  return out;
}

}  // namespace ptd::decoder
