#include "image/inline_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "image/demangle.h"
#include "image/dwarf_file.h"

namespace ptd::image {

struct InlineTable::Unit {
  Dwarf_Off die_offset = 0;  // of the unit's DIE, read with the unit
  bool read = false;
  std::vector<Interval> intervals;  // sorted, non-overlapping
  // Those whose frame is inlined, neighbours with the same frame merged (HasInlinedIn:
  // one search).
  std::vector<Interval> inlined;
};

namespace {

// A DIE's address ranges ([start, end) pairs); none for declarations and abstract
// instances.
template <typename F>
void ForEachRange(Dwarf_Die* die, F&& f) {
  Dwarf_Addr base = 0;
  Dwarf_Addr start = 0;
  Dwarf_Addr end = 0;
  for (ptrdiff_t offset = 0; (offset = dwarf_ranges(die, offset, &base, &start, &end)) > 0;) {
    if (end > start) f(uint64_t{start}, uint64_t{end});
  }
}

const char* StringAttribute(Dwarf_Die* die, unsigned int name) {
  Dwarf_Attribute attr;
  if (dwarf_attr_integrate(die, name, &attr) == nullptr) return nullptr;
  return dwarf_formstring(&attr);
}

}  // namespace

std::string DefinitionLocation(const SourceFrame& frame) {
  if (frame.decl_file.empty()) return "";
  return absl::StrCat(frame.decl_file, ":", frame.decl_line);
}

InlineTable::InlineTable() = default;
InlineTable::~InlineTable() = default;

absl::StatusOr<std::unique_ptr<InlineTable>> InlineTable::Open(const std::string& debug_path) {
  std::unique_ptr<InlineTable> table(new InlineTable());
  table->path_ = debug_path;
  absl::StatusOr<std::unique_ptr<DwarfFile>> file = DwarfFile::Open(debug_path);
  if (!file.ok()) return file.status();
  table->dwarf_ = *std::move(file);
  Dwarf* dwarf = table->dwarf_->dwarf();
  // .debug_aranges maps addresses to units in one small section (GCC writes it; clang
  // only with -gdwarf-aranges). The units it does not name, found by their headers
  // alone, give their ranges from their DIEs: a walk that reads every such unit's
  // abbreviations and attributes.
  absl::flat_hash_map<Dwarf_Off, Unit*> units_by_die;
  auto unit_at = [&](Dwarf_Off die_offset) {
    Unit*& unit = units_by_die[die_offset];
    if (unit == nullptr) {
      table->units_.push_back(std::make_unique<Unit>());
      unit = table->units_.back().get();
      unit->die_offset = die_offset;
    }
    return unit;
  };
  Dwarf_Aranges* aranges = nullptr;
  size_t arange_count = 0;
  if (dwarf_getaranges(dwarf, &aranges, &arange_count) != 0) arange_count = 0;
  for (size_t i = 0; i < arange_count; ++i) {
    Dwarf_Addr start = 0;
    Dwarf_Word length = 0;
    Dwarf_Off die_offset = 0;
    if (dwarf_getarangeinfo(dwarf_onearange(aranges, i), &start, &length, &die_offset) != 0 || length == 0) continue;
    table->unit_ranges_.push_back(UnitRange{start, start + length, unit_at(die_offset)});
  }
  Dwarf_Off offset = 0;
  Dwarf_Off next = 0;
  size_t header_size = 0;
  uint8_t unit_type = 0;
  while (dwarf_next_unit(dwarf, offset, &next, &header_size, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) ==
         0) {
    const Dwarf_Off die_offset = offset + header_size;
    offset = next;
    if (units_by_die.contains(die_offset)) continue;
    Dwarf_Die die;
    if (dwarf_offdie(dwarf, die_offset, &die) == nullptr) continue;
    if (dwarf_cu_info(die.cu, nullptr, &unit_type, nullptr, nullptr, nullptr, nullptr, nullptr) != 0 ||
        (unit_type != DW_UT_compile && unit_type != DW_UT_partial)) {
      continue;
    }
    ForEachRange(&die, [&](uint64_t start, uint64_t end) {
      table->unit_ranges_.push_back(UnitRange{start, end, unit_at(die_offset)});
    });
  }
  std::sort(table->unit_ranges_.begin(), table->unit_ranges_.end(),
            [](const UnitRange& a, const UnitRange& b) { return a.start < b.start; });
  return table;
}

absl::string_view InlineTable::Intern(absl::string_view text) const {
  if (text.empty()) return {};
  return *strings_.emplace(text).first;
}

void InlineTable::ReadUnit(Unit& unit) const {
  unit.read = true;
  Dwarf_Die unit_die;
  if (dwarf_offdie(dwarf_->dwarf(), unit.die_offset, &unit_die) == nullptr) return;
  Dwarf_Files* files = nullptr;
  size_t file_count = 0;
  if (dwarf_getsrcfiles(&unit_die, &files, &file_count) != 0) files = nullptr;
  auto absolute_fn = [&](const char* name) -> absl::string_view {
    return Intern(AbsoluteSourcePath(&unit_die, name));
  };
  auto file_name_at = [&](Dwarf_Word index) -> absl::string_view {
    if (files == nullptr || index >= file_count) return {};
    return absolute_fn(dwarf_filesrc(files, index, nullptr, nullptr));
  };

  struct Range {
    uint64_t start;
    uint64_t end;
    const SourceFrame* frame;
  };
  std::vector<Range> ranges;

  // Depth-first over the unit's DIEs; `parent`: the innermost function around them.
  struct Walk {
    const InlineTable* table;
    decltype(file_name_at)& file_name;
    decltype(absolute_fn)& absolute;
    std::vector<Range>& ranges;

    void Children(Dwarf_Die* die, const SourceFrame* parent) {
      Dwarf_Die child;
      if (dwarf_child(die, &child) != 0) return;
      do {
        Visit(&child, parent);
      } while (dwarf_siblingof(&child, &child) == 0);
    }

    void Visit(Dwarf_Die* die, const SourceFrame* parent) {
      const int tag = dwarf_tag(die);
      const bool inlined = tag == DW_TAG_inlined_subroutine;
      if (tag != DW_TAG_subprogram && !inlined) {
        // Lexical blocks, namespaces and classes hold functions too; types and
        // variables hold none.
        if (tag == DW_TAG_lexical_block || tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
            tag == DW_TAG_structure_type || tag == DW_TAG_union_type || tag == DW_TAG_module) {
          Children(die, parent);
        }
        return;
      }
      SourceFrame frame;
      frame.inlined = inlined;
      // Out-of-line subprograms nested in another (GCC nested functions) start their own
      // chain: they are called, not inlined.
      frame.parent = inlined ? parent : nullptr;
      frame.depth = frame.parent == nullptr ? 0 : frame.parent->depth + 1;
      const char* linkage = StringAttribute(die, DW_AT_linkage_name);
      if (linkage == nullptr) linkage = StringAttribute(die, DW_AT_MIPS_linkage_name);
      if (linkage != nullptr) {
        frame.name = table->Intern(Demangle(linkage));
      } else if (const char* name = StringAttribute(die, DW_AT_name); name != nullptr) {
        frame.name = table->Intern(name);
      }
      frame.decl_file = absolute(dwarf_decl_file(die));
      int line = 0;
      if (dwarf_decl_line(die, &line) == 0 && line > 0) frame.decl_line = static_cast<uint32_t>(line);
      if (inlined) {
        Dwarf_Attribute attr;
        Dwarf_Word value = 0;
        if (dwarf_attr(die, DW_AT_call_file, &attr) != nullptr && dwarf_formudata(&attr, &value) == 0) {
          frame.call_file = file_name(value);
        }
        if (dwarf_attr(die, DW_AT_call_line, &attr) != nullptr && dwarf_formudata(&attr, &value) == 0) {
          frame.call_line = static_cast<uint32_t>(value);
        }
      }
      bool has_code = false;
      ForEachRange(die, [&](uint64_t, uint64_t) { has_code = true; });
      if (!has_code) {
        // A declaration or an abstract instance: neither it nor anything below it is
        // code (concrete instances of its inlined calls are under the concrete callers).
        return;
      }
      table->frames_.push_back(frame);
      const SourceFrame* stored = &table->frames_.back();
      ForEachRange(die, [&](uint64_t start, uint64_t end) { ranges.push_back(Range{start, end, stored}); });
      Children(die, stored);
    }
  };
  Walk walk{this, file_name_at, absolute_fn, ranges};
  walk.Children(&unit_die, nullptr);

  // Each elementary interval between range bounds belongs to the deepest range over it:
  // ranges painted outermost first, inner ones over them.
  std::vector<uint64_t> bounds;
  bounds.reserve(ranges.size() * 2);
  for (const Range& r : ranges) {
    bounds.push_back(r.start);
    bounds.push_back(r.end);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::stable_sort(ranges.begin(), ranges.end(),
                   [](const Range& a, const Range& b) { return a.frame->depth < b.frame->depth; });
  std::vector<const SourceFrame*> painted(bounds.empty() ? 0 : bounds.size() - 1, nullptr);
  for (const Range& r : ranges) {
    size_t first = std::lower_bound(bounds.begin(), bounds.end(), r.start) - bounds.begin();
    size_t last = std::lower_bound(bounds.begin(), bounds.end(), r.end) - bounds.begin();
    for (size_t i = first; i < last; ++i) painted[i] = r.frame;
  }
  for (size_t i = 0; i < painted.size(); ++i) {
    if (painted[i] == nullptr) continue;
    if (!unit.intervals.empty() && unit.intervals.back().end == bounds[i] &&
        unit.intervals.back().frame == painted[i]) {
      unit.intervals.back().end = bounds[i + 1];
    } else {
      unit.intervals.push_back(Interval{bounds[i], bounds[i + 1], painted[i]});
    }
  }
  for (const Interval& interval : unit.intervals) {
    if (!interval.frame->inlined) continue;
    if (!unit.inlined.empty() && unit.inlined.back().end == interval.start &&
        unit.inlined.back().frame == interval.frame) {
      unit.inlined.back().end = interval.end;
    } else {
      unit.inlined.push_back(interval);
    }
  }
}

namespace {

// The interval of sorted, non-overlapping `intervals` holding `address`, or nullptr;
// narrows [*start, *end) to it or to the gap around `address`.
template <typename Interval>
const Interval* IntervalAt(const std::vector<Interval>& intervals, uint64_t address, uint64_t* start, uint64_t* end) {
  auto it = std::upper_bound(intervals.begin(), intervals.end(), address,
                             [](uint64_t a, const Interval& i) { return a < i.start; });
  if (it != intervals.end()) *end = std::min(*end, it->start);
  if (it == intervals.begin()) return nullptr;
  const Interval& before = *std::prev(it);
  if (address >= before.end) {
    *start = std::max(*start, before.end);
    return nullptr;
  }
  *start = std::max(*start, before.start);
  *end = std::min(*end, before.end);
  return &before;
}

}  // namespace

InlineTable::Unit* InlineTable::UnitAt(uint64_t address, uint64_t* start, uint64_t* end) const {
  const UnitRange* range = IntervalAt(unit_ranges_, address, start, end);
  if (range == nullptr) return nullptr;
  if (!range->unit->read) ReadUnit(*range->unit);
  return range->unit;
}

const SourceFrame* InlineTable::InnermostAt(uint64_t address, uint64_t* end) const {
  uint64_t start = 0;
  uint64_t answer_end = ~uint64_t{0};
  const SourceFrame* answer = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const Unit* unit = UnitAt(address, &start, &answer_end)) {
      const Interval* interval = IntervalAt(unit->intervals, address, &start, &answer_end);
      if (interval != nullptr) answer = interval->frame;
    }
  }
  if (end != nullptr) *end = answer_end;
  return answer;
}

bool InlineTable::HasInlinedIn(uint64_t start, uint64_t end) const {
  // The inlined intervals of each unit the range touches: one search per unit.
  for (uint64_t a = start; a < end;) {
    uint64_t unit_start = 0;
    uint64_t unit_end = ~uint64_t{0};
    std::lock_guard<std::mutex> lock(mutex_);
    const Unit* unit = UnitAt(a, &unit_start, &unit_end);
    if (unit != nullptr) {
      auto it = std::upper_bound(unit->inlined.begin(), unit->inlined.end(), a,
                                 [](uint64_t x, const Interval& i) { return x < i.end; });
      if (it != unit->inlined.end() && it->start < std::min(end, unit_end)) return true;
    }
    if (unit_end <= a) break;
    a = unit_end;
  }
  return false;
}

std::vector<const SourceFrame*> InlineTable::ChainAt(uint64_t address) const {
  std::vector<const SourceFrame*> chain;
  for (const SourceFrame* f = InnermostAt(address); f != nullptr; f = f->parent) chain.push_back(f);
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace ptd::image
