#include "image/line_table.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "image/dwarf_file.h"

namespace ptd::image {

absl::StatusOr<LineTable> LineTable::Load(const std::string& path) {
  absl::StatusOr<std::unique_ptr<DwarfFile>> file = DwarfFile::Open(path);
  if (!file.ok()) return file.status();
  ::Dwarf* dwarf = (*file)->dwarf();
  LineTable table;
  absl::flat_hash_map<std::string, uint32_t> file_index;
  Dwarf_Off offset = 0;
  Dwarf_Off next = 0;
  size_t header_size = 0;
  while (dwarf_nextcu(dwarf, offset, &next, &header_size, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die cu;
    Dwarf_Lines* lines = nullptr;
    size_t count = 0;
    if (dwarf_offdie(dwarf, offset + header_size, &cu) != nullptr && dwarf_getsrclines(&cu, &lines, &count) == 0) {
      for (size_t i = 0; i < count; ++i) {
        Dwarf_Line* line = dwarf_onesrcline(lines, i);
        Dwarf_Addr address = 0;
        int number = 0;
        bool end = false;
        if (line == nullptr || dwarf_lineaddr(line, &address) != 0 || dwarf_lineno(line, &number) != 0 ||
            dwarf_lineendsequence(line, &end) != 0) {
          continue;
        }
        const std::string name = AbsoluteSourcePath(&cu, dwarf_linesrc(line, nullptr, nullptr));
        auto [it, inserted] = file_index.try_emplace(name, table.files_.size());
        if (inserted) table.files_.push_back(name);
        table.rows_.push_back(Row{address, it->second, static_cast<uint32_t>(std::max(number, 0)), end});
      }
    }
    offset = next;
  }
  if (table.rows_.empty()) return absl::NotFoundError(absl::StrCat(path, ": no DWARF line table"));
  // By address; at one address the sequence's end before a new sequence's start.
  std::stable_sort(table.rows_.begin(), table.rows_.end(), [](const Row& a, const Row& b) {
    return a.address != b.address ? a.address < b.address : a.end_sequence > b.end_sequence;
  });
  return table;
}

std::optional<SourceLine> LineTable::Find(uint64_t address) const {
  auto after = std::upper_bound(rows_.begin(), rows_.end(), address,
                                [](uint64_t a, const Row& row) { return a < row.address; });
  if (after == rows_.begin()) return std::nullopt;
  const Row& row = *std::prev(after);
  if (row.end_sequence || row.line == 0) return std::nullopt;
  return SourceLine{row.file, row.line};
}

std::vector<SourceLine> LineTable::Lines() const {
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const Row& row : rows_) {
    if (!row.end_sequence && row.line != 0) seen.insert({row.file, row.line});
  }
  std::vector<SourceLine> out;
  for (const auto& [file, line] : seen) out.push_back(SourceLine{file, line});
  return out;
}

}  // namespace ptd::image
