#pragma once
// The DWARF of one code file (libdw), as far as call stacks need it: for an ELF address,
// the function that holds it and the functions inlined there (DW_TAG_subprogram and its
// nested DW_TAG_inlined_subroutine ranges), each with its name and source location.
//
// Read lazily: opening reads the compilation units' address ranges only; a unit's
// functions are read on the first lookup that falls in it, into a flat table of address
// intervals, each naming its innermost frame. Memory is proportional to the functions and
// inlined ranges of the units looked up. Thread-safe.

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/node_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ptd::image {

class DwarfFile;

// A function in the source: a subprogram, or one inlined call of one. Nodes form trees:
// an inlined call's parent is the frame its call site is in.
struct SourceFrame {
  const SourceFrame* parent = nullptr;  // the enclosing frame; nullptr for a subprogram
  uint32_t depth = 0;            // 0 for the subprogram, 1 for what is inlined into it, ...
  bool inlined = false;
  absl::string_view name;        // demangled linkage name, else DW_AT_name; may be empty
  absl::string_view decl_file;   // where the function is declared (its definition)
  uint32_t decl_line = 0;        // 0: unknown
  absl::string_view call_file;   // inlined frames: the call site the body was put in
  uint32_t call_line = 0;
};

// "file:line" of where `frame`'s function is defined (its `source` slice arg and its
// `--summary` line); empty when the debug info names no file.
std::string DefinitionLocation(const SourceFrame& frame);

class InlineTable {
 public:
  // Opens `debug_path` (an ELF with .debug_info: the code file itself or its separate
  // debug file) and reads its compilation units' ranges. An error when the file cannot
  // be read or has no DWARF.
  static absl::StatusOr<std::unique_ptr<InlineTable>> Open(const std::string& debug_path);
  ~InlineTable();
  InlineTable(const InlineTable&) = delete;
  InlineTable& operator=(const InlineTable&) = delete;

  // The innermost frame holding ELF address `address`, or nullptr when no function of
  // the debug info does. Frames stay valid as long as the table; every address with the
  // same innermost frame has the same chain. With `end`: the end (exclusive) of the
  // interval around `address` where the answer stays the same.
  const SourceFrame* InnermostAt(uint64_t address, uint64_t* end = nullptr) const;
  // Some inlined call's code lies in [start, end) (ELF addresses).
  bool HasInlinedIn(uint64_t start, uint64_t end) const;
  // The chain at `address`, outermost (the subprogram) first; empty when none.
  std::vector<const SourceFrame*> ChainAt(uint64_t address) const;

  const std::string& path() const { return path_; }

 private:
  struct Interval {
    uint64_t start = 0;
    uint64_t end = 0;  // exclusive
    const SourceFrame* frame = nullptr;
  };
  struct Unit;
  // The unit holding `address`, read on first use (with mutex_ held), or nullptr; `start`
  // and `end` are narrowed to the unit range or the gap around `address`.
  Unit* UnitAt(uint64_t address, uint64_t* start, uint64_t* end) const;
  struct UnitRange {
    uint64_t start = 0;
    uint64_t end = 0;  // exclusive
    Unit* unit = nullptr;
  };
  InlineTable();
  // Reads `unit`'s functions into its intervals (with mutex_ held).
  void ReadUnit(Unit& unit) const;
  absl::string_view Intern(absl::string_view text) const;

  std::string path_;
  std::unique_ptr<DwarfFile> dwarf_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<UnitRange> unit_ranges_;  // sorted by start, non-overlapping

  mutable std::mutex mutex_;
  mutable std::deque<SourceFrame> frames_;  // a deque: frames stay where they are
  mutable absl::node_hash_set<std::string> strings_;  // node: views into it stay valid
};

}  // namespace ptd::image
