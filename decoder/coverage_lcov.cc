#include "decoder/coverage_lcov.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "image/insn_classifier.h"
#include "image/line_table.h"

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

std::string CoverageLcov(const CoverageCollector& coverage, std::vector<std::string>* notes) {
  const std::vector<CoveredBlock> blocks = coverage.Blocks();
  std::string out;
  size_t first = 0;
  for (size_t m = 0; m < coverage.modules().size(); ++m) {
    size_t end = first;
    while (end < blocks.size() && blocks[end].module == m) ++end;
    const size_t begin = first;
    first = end;
    const CoverageModule& module = coverage.modules()[m];
    if (module.module == nullptr || !module.module->is_elf) {
      notes->push_back(absl::StrCat(module.name, ": not an ELF file, no lines"));
      continue;
    }
    const image::Module& elf = *module.module;
    const std::string& debug_file = elf.symbols_from.empty() ? elf.path : elf.symbols_from;
    absl::StatusOr<image::LineTable> table = image::LineTable::Load(debug_file);
    if (!table.ok()) {
      notes->push_back(absl::StrCat(module.name, ": no lines (", table.status().message(), ")"));
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
    // A line's count: its most executed instruction's; a function's: its first executed
    // instruction's (its entry, for a function entered at its start).
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> line_hits;  // (file, line)
    struct FunctionEntry {
      uint64_t address = UINT64_MAX;
      uint64_t hits = 0;
      std::optional<image::SourceLine> line;
    };
    std::map<std::string, FunctionEntry> functions;
    for (const auto& [offset, counted] : instructions) {
      const std::optional<uint64_t> address = ElfAddressOf(elf.elf, offset);
      if (!address) continue;
      const std::optional<image::SourceLine> line = table->Find(*address);
      if (line) {
        uint64_t& hits = line_hits[{line->file, line->line}];
        hits = std::max(hits, counted.first);
      }
      FunctionEntry& f = functions[coverage.functions()[counted.second]];
      if (*address < f.address) f = FunctionEntry{*address, counted.first, line};
    }
    // Per source file: its functions and every line with code.
    std::map<uint32_t, std::vector<image::SourceLine>> lines_of;
    for (const image::SourceLine& l : table->Lines()) lines_of[l.file].push_back(l);
    for (const auto& [file, lines] : lines_of) {
      size_t hit = 0;
      std::string da;
      for (const image::SourceLine& l : lines) {
        auto it = line_hits.find({l.file, l.line});
        const uint64_t hits = it == line_hits.end() ? 0 : it->second;
        hit += hits > 0 ? 1 : 0;
        absl::StrAppendFormat(&da, "DA:%d,%d\n", l.line, hits);
      }
      if (hit == 0) continue;  // a file none of whose code ran (headers, other CUs)
      absl::StrAppend(&out, "TN:\nSF:", table->files()[file], "\n");
      size_t fn = 0;
      std::string fnda;
      for (const auto& [name, f] : functions) {
        if (!f.line || f.line->file != file) continue;
        absl::StrAppendFormat(&out, "FN:%d,%s\n", f.line->line, name);
        absl::StrAppendFormat(&fnda, "FNDA:%d,%s\n", f.hits, name);
        ++fn;
      }
      absl::StrAppend(&out, fnda);
      absl::StrAppendFormat(&out, "FNF:%d\nFNH:%d\n", fn, fn);
      absl::StrAppend(&out, da);
      absl::StrAppendFormat(&out, "LF:%d\nLH:%d\nend_of_record\n", lines.size(), hit);
    }
  }
  return out;
}

}  // namespace ptd::decoder
