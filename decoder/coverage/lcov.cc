#include "decoder/coverage/lcov.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "decoder/coverage/lines.h"

namespace ptd::decoder {

std::string CoverageLcov(const CoverageCollector& coverage, std::vector<std::string>* notes) {
  const std::vector<ModuleLines> modules = CoverageLines(coverage);
  std::string out;
  for (size_t m = 0; m < modules.size(); ++m) {
    const ModuleLines& module = modules[m];
    if (!module.missing.empty()) {
      notes->push_back(absl::StrCat(coverage.modules()[m].name, ": no lines (", module.missing, ")"));
      continue;
    }
    // Per source file: its functions and every line with code.
    std::map<uint32_t, std::vector<image::SourceLine>> lines_of;
    for (const image::SourceLine& l : module.lines) lines_of[l.file].push_back(l);
    for (const auto& [file, lines] : lines_of) {
      size_t hit = 0;
      std::string da;
      for (const image::SourceLine& l : lines) {
        auto it = module.hits.find({l.file, l.line});
        const uint64_t hits = it == module.hits.end() ? 0 : it->second;
        hit += hits > 0 ? 1 : 0;
        absl::StrAppendFormat(&da, "DA:%d,%d\n", l.line, hits);
      }
      if (hit == 0) continue;  // a file none of whose code ran (headers, other CUs)
      absl::StrAppend(&out, "TN:\nSF:", module.files[file], "\n");
      size_t fn = 0;
      std::string fnda;
      for (const auto& [name, f] : module.functions) {
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
