#include "perfdata/elf_build_id.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"

namespace ptd::perfdata {

absl::StatusOr<std::string> ReadElfBuildId(const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return absl::InternalError("libelf initialization failed");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  std::string build_id;
  if (elf != nullptr) {
    // Notes live in SHT_NOTE sections; dumped vDSOs keep their section headers.
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr && build_id.empty();
         scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_NOTE) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (data == nullptr) continue;
      size_t offset = 0, name_off = 0, desc_off = 0;
      GElf_Nhdr nhdr;
      while ((offset = gelf_getnote(data, offset, &nhdr, &name_off, &desc_off)) > 0) {
        if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
            std::string(static_cast<const char*>(data->d_buf) + name_off, 3) == "GNU") {
          const auto* desc = static_cast<const uint8_t*>(data->d_buf) + desc_off;
          for (size_t i = 0; i < nhdr.n_descsz; ++i) absl::StrAppendFormat(&build_id, "%02x", desc[i]);
          break;
        }
      }
    }
    elf_end(elf);
  }
  close(fd);
  if (build_id.empty()) return absl::NotFoundError(absl::StrCat(path, ": no GNU build-id note"));
  return build_id;
}

}  // namespace ptd::perfdata
