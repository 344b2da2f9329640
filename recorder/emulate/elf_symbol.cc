#include "recorder/emulate/elf_symbol.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "recorder/proc_maps.h"

namespace ptd {
namespace {

// An ELF file open for libelf; closed by the destructor.
class OpenElf {
 public:
  static absl::StatusOr<std::unique_ptr<OpenElf>> Open(const std::string& path) {
    elf_version(EV_CURRENT);
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("open ELF", path, errno);
    Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
    if (elf == nullptr) {
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: not an ELF file: %s", path, elf_errmsg(-1)));
    }
    return std::unique_ptr<OpenElf>(new OpenElf(fd, elf));
  }
  ~OpenElf() {
    elf_end(elf_);
    close(fd_);
  }
  Elf* elf() const { return elf_; }

 private:
  OpenElf(int fd, Elf* elf) : fd_(fd), elf_(elf) {}
  int fd_;
  Elf* elf_;
};

}  // namespace

absl::StatusOr<ElfCodeRange> FindElfCodeRange(const std::string& path) {
  absl::StatusOr<std::unique_ptr<OpenElf>> file = OpenElf::Open(path);
  if (!file.ok()) return file.status();
  Elf* elf = (*file)->elf();
  uint64_t begin = UINT64_MAX;
  uint64_t end = 0;
  size_t phnum = 0;
  elf_getphdrnum(elf, &phnum);
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf, static_cast<int>(i), &phdr) == nullptr || phdr.p_type != PT_LOAD ||
        (phdr.p_flags & PF_X) == 0) {
      continue;
    }
    begin = std::min<uint64_t>(begin, phdr.p_offset);
    end = std::max<uint64_t>(end, phdr.p_offset + phdr.p_filesz);
  }
  if (end <= begin) {
    return absl::NotFoundError(absl::StrFormat("%s: no executable PT_LOAD segment", path));
  }
  return ElfCodeRange{begin, end - begin};
}

absl::StatusOr<ElfSymbolAddress> FindElfFunction(const std::string& path, const std::string& name) {
  absl::StatusOr<std::unique_ptr<OpenElf>> file = OpenElf::Open(path);
  if (!file.ok()) return file.status();
  Elf* elf = (*file)->elf();
  ElfSymbolAddress result;
  GElf_Ehdr ehdr;
  bool found = false;
  if (gelf_getehdr(elf, &ehdr) != nullptr) {
    result.position_independent = ehdr.e_type == ET_DYN;
    size_t phnum = 0;
    elf_getphdrnum(elf, &phnum);
    std::vector<GElf_Phdr> loads;
    for (size_t i = 0; i < phnum; ++i) {
      GElf_Phdr phdr;
      if (gelf_getphdr(elf, static_cast<int>(i), &phdr) != nullptr && phdr.p_type == PT_LOAD) {
        if (loads.empty()) result.first_load_vaddr = phdr.p_vaddr & ~0xfffull;
        loads.push_back(phdr);
      }
    }
    auto file_offset_of = [&loads](uint64_t vaddr) -> uint64_t {
      for (const GElf_Phdr& load : loads) {
        if (vaddr >= load.p_vaddr && vaddr < load.p_vaddr + load.p_filesz) {
          return vaddr - load.p_vaddr + load.p_offset;
        }
      }
      return vaddr;
    };
    for (int pass = 0; pass < 2 && !found; ++pass) {
      const Elf64_Word wanted = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
      Elf_Scn* scn = nullptr;
      while (!found && (scn = elf_nextscn(elf, scn)) != nullptr) {
        GElf_Shdr shdr;
        if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != wanted || shdr.sh_entsize == 0) {
          continue;
        }
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (data == nullptr) continue;
        const size_t count = shdr.sh_size / shdr.sh_entsize;
        for (size_t i = 0; i < count; ++i) {
          GElf_Sym sym;
          if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
          if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_value == 0) continue;
          const char* sym_name = elf_strptr(elf, shdr.sh_link, sym.st_name);
          if (sym_name != nullptr && name == sym_name) {
            result.value = sym.st_value;
            result.size = sym.st_size;
            result.file_offset = file_offset_of(sym.st_value);
            found = true;
            break;
          }
        }
      }
    }
  }
  if (!found) {
    return absl::NotFoundError(absl::StrFormat("%s: no function symbol named '%s'", path, name));
  }
  return result;
}

absl::StatusOr<uint64_t> ResolveStartSymbol(int pid, const std::string& name) {
  char exe[PATH_MAX] = {};
  const std::string link = absl::StrFormat("/proc/%d/exe", pid);
  const ssize_t n = readlink(link.c_str(), exe, sizeof(exe) - 1);
  if (n <= 0) return ErrnoError("readlink", link, errno);
  const std::string exe_path(exe, static_cast<size_t>(n));
  absl::StatusOr<ElfSymbolAddress> symbol = FindElfFunction(exe_path, name);
  if (!symbol.ok()) return symbol.status();
  if (!symbol->position_independent) return symbol->value;
  absl::StatusOr<std::vector<ProcMapping>> maps = ReadProcMaps(pid);
  if (!maps.ok()) return maps.status();
  for (const ProcMapping& m : *maps) {
    if (m.path == exe_path && m.pgoff == 0) {
      return m.start - symbol->first_load_vaddr + symbol->value;
    }
  }
  return absl::NotFoundError(
      absl::StrFormat("--start-at %s: %s is not mapped in process %d", name, exe_path, pid));
}

}  // namespace ptd
