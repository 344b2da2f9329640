#pragma once
// One ELF file's DWARF through elfutils' libdw, for the readers of its different parts
// (inline_table.h: functions and inlined calls; line_table.h: line tables).

#include <elfutils/libdw.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ptd::image {

class DwarfFile {
 public:
  // NotFound when the file cannot be opened or holds no DWARF; the message names it.
  static absl::StatusOr<std::unique_ptr<DwarfFile>> Open(const std::string& path);
  ~DwarfFile();
  DwarfFile(const DwarfFile&) = delete;
  DwarfFile& operator=(const DwarfFile&) = delete;

  ::Dwarf* dwarf() const { return dwarf_; }

 private:
  DwarfFile(int fd, ::Dwarf* dwarf) : fd_(fd), dwarf_(dwarf) {}
  int fd_;
  ::Dwarf* dwarf_;
};

// A source file name as a unit's DWARF gives it, made absolute: relative names (the
// unit's own file in DWARF 4) are relative to the unit's DW_AT_comp_dir.
std::string AbsoluteSourcePath(Dwarf_Die* unit, const char* name);

}  // namespace ptd::image
