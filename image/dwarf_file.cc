#include "image/dwarf_file.h"

#include <dwarf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ptd::image {

absl::StatusOr<std::unique_ptr<DwarfFile>> DwarfFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  ::Dwarf* dwarf = dwarf_begin(fd, DWARF_C_READ);
  if (dwarf == nullptr) {
    ::close(fd);
    return absl::NotFoundError(absl::StrCat(path, ": no DWARF: ", dwarf_errmsg(-1)));
  }
  return std::unique_ptr<DwarfFile>(new DwarfFile(fd, dwarf));
}

DwarfFile::~DwarfFile() {
  dwarf_end(dwarf_);
  ::close(fd_);
}

std::string AbsoluteSourcePath(Dwarf_Die* unit, const char* name) {
  if (name == nullptr) return "";
  Dwarf_Attribute attribute;
  const char* comp_dir = dwarf_formstring(dwarf_attr_integrate(unit, DW_AT_comp_dir, &attribute));
  if (name[0] == '/' || name[0] == '\0' || comp_dir == nullptr) return name;
  return absl::StrCat(comp_dir, "/", name);
}

}  // namespace ptd::image
