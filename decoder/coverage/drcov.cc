#include "decoder/coverage/drcov.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ptd::decoder {
namespace {

void AppendLittleEndian(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

std::string CoverageDrcov(const CoverageCollector& coverage) {
  const std::vector<CoverageModule>& modules = coverage.modules();
  std::string out = "DRCOV VERSION: 2\nDRCOV FLAVOR: drcov\n";
  absl::StrAppendFormat(&out, "Module Table: version 2, count %d\n", modules.size());
  absl::StrAppend(&out, "Columns: id, base, end, entry, path\n");
  for (size_t i = 0; i < modules.size(); ++i) {
    // entry: the module's entry point; not known here, and no reader uses it.
    absl::StrAppendFormat(&out, "%3d, 0x%016x, 0x%016x, 0x%016x, %s\n", i, modules[i].base, modules[i].end, 0,
                          modules[i].name);
  }
  // Offsets past 4 GiB from a module's base (none in an ELF file's code) do not fit an
  // entry and are left out.
  std::vector<CoveredBlock> blocks;
  for (const CoveredBlock& b : coverage.Blocks()) {
    if (b.offset <= UINT32_MAX && b.module <= UINT16_MAX) blocks.push_back(b);
  }
  absl::StrAppendFormat(&out, "BB Table: %d bbs\n", blocks.size());
  for (const CoveredBlock& b : blocks) {
    AppendLittleEndian(&out, b.offset, 4);
    AppendLittleEndian(&out, b.size, 2);
    AppendLittleEndian(&out, b.module, 2);
  }
  return out;
}

}  // namespace ptd::decoder
