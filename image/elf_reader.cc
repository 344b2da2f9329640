#include "image/elf_reader.h"

#include <gelf.h>
#include <libelf.h>

#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ptd::image {
namespace {

struct ElfCloser {
  void operator()(Elf* elf) const { elf_end(elf); }
};
using ElfHandle = std::unique_ptr<Elf, ElfCloser>;

absl::StatusOr<ElfHandle> OpenElf(absl::Span<const uint8_t> bytes, const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return absl::InternalError("libelf: version mismatch");
  if (!LooksLikeElf(bytes)) return absl::InvalidArgumentError(absl::StrCat(path, ": not an ELF file"));
  // libelf wants a mutable pointer but only reads with ELF_C_READ_MMAP-like memory.
  Elf* elf = elf_memory(const_cast<char*>(reinterpret_cast<const char*>(bytes.data())), bytes.size());
  if (elf == nullptr || elf_kind(elf) != ELF_K_ELF) {
    if (elf != nullptr) elf_end(elf);
    return absl::InvalidArgumentError(absl::StrCat(path, ": libelf cannot read it: ", elf_errmsg(-1)));
  }
  return ElfHandle(elf);
}

std::string Hex(const uint8_t* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}

std::string FindBuildId(Elf* elf) {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_NOTE) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr) continue;
    size_t offset = 0, name_offset = 0, desc_offset = 0;
    GElf_Nhdr note;
    while ((offset = gelf_getnote(data, offset, &note, &name_offset, &desc_offset)) > 0) {
      const char* base = static_cast<const char*>(data->d_buf);
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          std::memcmp(base + name_offset, "GNU", 4) == 0 &&
          desc_offset + note.n_descsz <= data->d_size) {
        return Hex(reinterpret_cast<const uint8_t*>(base + desc_offset), note.n_descsz);
      }
    }
  }
  return "";
}

void AddSymbolsOfSection(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, SymbolTable* table) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr || shdr.sh_entsize == 0) return;
  size_t count = shdr.sh_size / shdr.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym sym;
    if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
    int type = GELF_ST_TYPE(sym.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (name == nullptr || name[0] == '\0') continue;
    table->Add(sym.st_value, sym.st_size, name);
  }
}

// PLT stubs have no symbols: name them after the dynamic symbol of their relocation.
// With IBT/.plt.sec the stubs callers reach are there (16 bytes each, in relocation
// order); otherwise .plt holds a 16-byte header (PLT0) and then one 16-byte stub each.
void AddPltSymbols(Elf* elf, SymbolTable* table) {
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return;
  Elf_Scn* scn = nullptr;
  GElf_Shdr plt{}, plt_sec{}, rela_plt{};
  Elf_Scn* rela_scn = nullptr;
  bool have_plt = false, have_plt_sec = false;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    const char* name = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (name == nullptr) continue;
    if (std::strcmp(name, ".plt") == 0) { plt = shdr; have_plt = true; }
    else if (std::strcmp(name, ".plt.sec") == 0) { plt_sec = shdr; have_plt_sec = true; }
    else if (std::strcmp(name, ".rela.plt") == 0) { rela_plt = shdr; rela_scn = scn; }
  }
  if (!have_plt) return;
  // PLT0 and lazy-binding trampolines: attributed to the stub's eventual target too.
  table->Add(plt.sh_addr, 16, "[plt]", /*plt=*/true);
  if (rela_scn == nullptr || rela_plt.sh_entsize == 0) return;
  Elf_Scn* dynsym_scn = elf_getscn(elf, rela_plt.sh_link);
  GElf_Shdr dynsym;
  if (dynsym_scn == nullptr || gelf_getshdr(dynsym_scn, &dynsym) == nullptr) return;
  Elf_Data* rela_data = elf_getdata(rela_scn, nullptr);
  Elf_Data* sym_data = elf_getdata(dynsym_scn, nullptr);
  if (rela_data == nullptr || sym_data == nullptr) return;
  size_t count = rela_plt.sh_size / rela_plt.sh_entsize;
  uint64_t first = have_plt_sec ? plt_sec.sh_addr : plt.sh_addr + 16;
  uint64_t limit = have_plt_sec ? plt_sec.sh_addr + plt_sec.sh_size : plt.sh_addr + plt.sh_size;
  for (size_t i = 0; i < count; ++i) {
    uint64_t stub = first + 16 * i;
    if (stub + 16 > limit) break;
    GElf_Rela rela;
    if (gelf_getrela(rela_data, static_cast<int>(i), &rela) == nullptr) continue;
    size_t sym_index = GELF_R_SYM(rela.r_info);
    const char* name = nullptr;
    GElf_Sym sym;
    if (sym_index != 0 && gelf_getsym(sym_data, static_cast<int>(sym_index), &sym) != nullptr) {
      name = elf_strptr(elf, dynsym.sh_link, sym.st_name);
    }
    std::string stub_name = name != nullptr && name[0] != '\0' ? absl::StrCat(name, "@plt")
                                                               : absl::StrFormat("[plt+0x%x]", stub - plt.sh_addr);
    table->Add(stub, 16, stub_name, /*plt=*/true);
  }
}

}  // namespace

bool LooksLikeElf(absl::Span<const uint8_t> bytes) {
  return bytes.size() >= 16 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F';
}

absl::StatusOr<ElfInfo> ReadElfInfo(absl::Span<const uint8_t> bytes, const std::string& path) {
  absl::StatusOr<ElfHandle> elf = OpenElf(bytes, path);
  if (!elf.ok()) return elf.status();
  ElfInfo info;
  info.is_elf64 = gelf_getclass(elf->get()) == ELFCLASS64;
  size_t phnum = 0;
  if (elf_getphdrnum(elf->get(), &phnum) != 0) phnum = 0;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf->get(), static_cast<int>(i), &phdr) == nullptr || phdr.p_type != PT_LOAD) continue;
    info.segments.push_back(ElfSegment{phdr.p_vaddr, phdr.p_offset, phdr.p_filesz, (phdr.p_flags & PF_X) != 0});
  }
  info.build_id = FindBuildId(elf->get());
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf->get(), scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) != nullptr && shdr.sh_type == SHT_SYMTAB) info.has_symtab = true;
  }
  return info;
}

absl::Status ReadElfSymbols(absl::Span<const uint8_t> bytes, const std::string& path,
                            SymbolTable* table) {
  absl::StatusOr<ElfHandle> elf = OpenElf(bytes, path);
  if (!elf.ok()) return elf.status();
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf->get(), scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    if (shdr.sh_type == SHT_SYMTAB || shdr.sh_type == SHT_DYNSYM) {
      AddSymbolsOfSection(elf->get(), scn, shdr, table);
    }
  }
  AddPltSymbols(elf->get(), table);
  return absl::OkStatus();
}

std::string DebugFileForBuildId(const std::string& build_id, const std::string& debug_root) {
  if (build_id.size() < 3) return "";
  return absl::StrCat(debug_root, "/.build-id/", build_id.substr(0, 2), "/", build_id.substr(2), ".debug");
}

}  // namespace ptd::image
