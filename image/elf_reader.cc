#include "image/elf_reader.h"

#include <gelf.h>
#include <libelf.h>

#include <Zydis/Decoder.h>
#include <lzma.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/container/flat_hash_map.h"
#include "common/elf_build_id.h"
#include "common/file_util.h"
#include "image/insn_classifier.h"

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

// The section named `wanted`, or nullptr.
Elf_Scn* FindSection(Elf* elf, const char* wanted, GElf_Shdr* shdr) {
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return nullptr;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    if (gelf_getshdr(scn, shdr) == nullptr) continue;
    const char* name = elf_strptr(elf, shstrndx, shdr->sh_name);
    if (name != nullptr && std::strcmp(name, wanted) == 0) return scn;
  }
  return nullptr;
}

// .gnu_debuglink: a NUL-terminated file name, padding, then a CRC32 of the debug file.
std::string ReadDebuglink(Elf* elf) {
  GElf_Shdr shdr;
  Elf_Scn* scn = FindSection(elf, ".gnu_debuglink", &shdr);
  if (scn == nullptr || shdr.sh_type == SHT_NOBITS) return "";
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr || data->d_buf == nullptr) return "";
  const char* name = static_cast<const char*>(data->d_buf);
  size_t length = strnlen(name, data->d_size);
  if (length == data->d_size || std::memchr(name, '/', length) != nullptr) return "";
  return std::string(name, length);
}

// MiniDebugInfo is an xz stream of a small ELF; limit what a damaged one can allocate.
constexpr uint64_t kMaxMiniDebugInfoSize = 256ull << 20;

absl::StatusOr<std::vector<uint8_t>> XzDecompress(absl::Span<const uint8_t> in, const std::string& what) {
  lzma_stream stream = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&stream, kMaxMiniDebugInfoSize, 0) != LZMA_OK) {
    return absl::InternalError(absl::StrCat(what, ": cannot start the xz decoder"));
  }
  std::vector<uint8_t> out(std::max<size_t>(4 * in.size(), 4096));
  stream.next_in = in.data();
  stream.avail_in = in.size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    if (stream.total_out == out.size()) {
      if (out.size() >= kMaxMiniDebugInfoSize) break;
      out.resize(2 * out.size());
    }
    stream.next_out = out.data() + stream.total_out;
    stream.avail_out = out.size() - stream.total_out;
    ret = lzma_code(&stream, LZMA_FINISH);
  }
  out.resize(stream.total_out);
  lzma_end(&stream);
  if (ret != LZMA_STREAM_END) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a whole xz stream (lzma error ", ret, ")"));
  }
  return out;
}

void AddCodeSymbols(absl::Span<const uint8_t> bytes, const std::string& path, SymbolTable* table,
                    absl::Status* status) {
  *status = ForEachElfSymbol(bytes, path, [table](const ElfSymbol& symbol) {
    if (IsCodeSymbol(symbol)) {
      table->Add(symbol.value, symbol.size, symbol.name, /*plt=*/false, symbol.binding == STB_LOCAL);
    }
  });
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

// The GOT slot an indirect `jmp *disp(%rip)` at `ip` reads (after an optional endbr64),
// or 0 when the stub is not that shape.
uint64_t JumpSlotOfStub(uint64_t ip, const uint8_t* bytes, size_t size) {
  size_t offset = 0;
  while (offset < size) {
    ZydisDecodedInstruction insn;
    ZydisDecodedOperand operands[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&ZydisDecoderFor(ptem_64bit), bytes + offset, size - offset, &insn,
                                             operands))) {
      return 0;
    }
    if (insn.mnemonic == ZYDIS_MNEMONIC_ENDBR64) {
      offset += insn.length;
      continue;
    }
    if (insn.mnemonic != ZYDIS_MNEMONIC_JMP || insn.operand_count_visible < 1) return 0;
    const ZydisDecodedOperand& target = operands[0];
    if (target.type != ZYDIS_OPERAND_TYPE_MEMORY || target.mem.base != ZYDIS_REGISTER_RIP ||
        target.mem.index != ZYDIS_REGISTER_NONE) {
      return 0;
    }
    return ip + offset + insn.length + static_cast<uint64_t>(target.mem.disp.value);
  }
  return 0;
}

// .plt.got stubs (a function both called and address-taken, or linked with -z now) have no
// relocation of their own: each jumps through a GOT slot that a dynamic relocation (GLOB_DAT)
// fills, so the stub is named after that relocation's symbol.
void AddPltGotSymbols(Elf* elf, SymbolTable* table) {
  GElf_Shdr plt_got;
  Elf_Scn* plt_got_scn = FindSection(elf, ".plt.got", &plt_got);
  if (plt_got_scn == nullptr || plt_got.sh_type == SHT_NOBITS || gelf_getclass(elf) != ELFCLASS64) return;
  Elf_Data* code = elf_getdata(plt_got_scn, nullptr);
  if (code == nullptr || code->d_buf == nullptr) return;
  absl::flat_hash_map<uint64_t, std::string> symbol_of_slot;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr rela;
    if (gelf_getshdr(scn, &rela) == nullptr || rela.sh_type != SHT_RELA || rela.sh_entsize == 0) continue;
    Elf_Scn* dynsym_scn = elf_getscn(elf, rela.sh_link);
    GElf_Shdr dynsym;
    if (dynsym_scn == nullptr || gelf_getshdr(dynsym_scn, &dynsym) == nullptr || dynsym.sh_type != SHT_DYNSYM) continue;
    Elf_Data* rela_data = elf_getdata(scn, nullptr);
    Elf_Data* sym_data = elf_getdata(dynsym_scn, nullptr);
    if (rela_data == nullptr || sym_data == nullptr) continue;
    const size_t count = rela.sh_size / rela.sh_entsize;
    for (size_t i = 0; i < count; ++i) {
      GElf_Rela entry;
      GElf_Sym sym;
      if (gelf_getrela(rela_data, static_cast<int>(i), &entry) == nullptr) continue;
      const size_t sym_index = GELF_R_SYM(entry.r_info);
      if (sym_index == 0 || gelf_getsym(sym_data, static_cast<int>(sym_index), &sym) == nullptr) continue;
      const char* name = elf_strptr(elf, dynsym.sh_link, sym.st_name);
      if (name != nullptr && name[0] != '\0') symbol_of_slot.emplace(entry.r_offset, name);
    }
  }
  // 8-byte stubs (jmp; xchg) or 16 with IBT (endbr64; bnd jmp; nop).
  const uint64_t stub_size = plt_got.sh_entsize != 0 ? plt_got.sh_entsize : 8;
  const auto* bytes = static_cast<const uint8_t*>(code->d_buf);
  for (uint64_t offset = 0; offset + stub_size <= code->d_size; offset += stub_size) {
    const uint64_t stub = plt_got.sh_addr + offset;
    const uint64_t slot = JumpSlotOfStub(stub, bytes + offset, stub_size);
    auto named = symbol_of_slot.find(slot);
    std::string stub_name = named != symbol_of_slot.end() ? absl::StrCat(named->second, "@plt")
                                                          : absl::StrFormat("[plt.got+0x%x]", offset);
    table->Add(stub, stub_size, stub_name, /*plt=*/true);
  }
}

}  // namespace

bool LooksLikeElf(absl::Span<const uint8_t> bytes) {
  return bytes.size() >= 16 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F';
}

const ElfSegment* SegmentOfCodeMapping(const ElfInfo& info, uint64_t file_offset, uint64_t size) {
  const ElfSegment* first_byte = nullptr;
  const ElfSegment* code = nullptr;
  uint64_t code_overlap = 0;
  for (const ElfSegment& seg : info.segments) {
    const uint64_t seg_end = seg.file_offset + std::max<uint64_t>(seg.file_size, 1);
    if (file_offset >= seg.file_offset && file_offset < seg_end && first_byte == nullptr) first_byte = &seg;
    const uint64_t overlap_start = std::max(file_offset, seg.file_offset);
    const uint64_t overlap_end = std::min(file_offset + size, seg_end);
    if (seg.executable && overlap_end > overlap_start && overlap_end - overlap_start > code_overlap) {
      code = &seg;
      code_overlap = overlap_end - overlap_start;
    }
  }
  if (first_byte != nullptr && first_byte->executable) return first_byte;
  return code != nullptr ? code : first_byte;
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
  absl::StatusOr<std::string> build_id = ElfBuildIdOfBytes(bytes, path);
  if (build_id.ok()) info.build_id = *build_id;  // 32-bit files: no build-id
  GElf_Ehdr ehdr;
  if (gelf_getehdr(elf->get(), &ehdr) != nullptr) {
    info.position_independent = ehdr.e_type == ET_DYN;
    info.entry = ehdr.e_entry;
  }
  info.debuglink = ReadDebuglink(elf->get());
  GElf_Shdr debugdata;
  info.has_minidebuginfo = FindSection(elf->get(), ".gnu_debugdata", &debugdata) != nullptr;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf->get(), scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) != nullptr && shdr.sh_type == SHT_SYMTAB) info.has_symtab = true;
  }
  return info;
}

absl::Status ForEachElfSymbol(absl::Span<const uint8_t> bytes, const std::string& path,
                              absl::FunctionRef<void(const ElfSymbol&)> visit) {
  absl::StatusOr<ElfHandle> handle = OpenElf(bytes, path);
  if (!handle.ok()) return handle.status();
  Elf* elf = handle->get();
  for (Elf64_Word table_type : {SHT_SYMTAB, SHT_DYNSYM}) {
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf, scn)) != nullptr) {
      GElf_Shdr shdr;
      if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != table_type || shdr.sh_entsize == 0) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (data == nullptr) continue;
      const size_t count = shdr.sh_size / shdr.sh_entsize;
      for (size_t i = 0; i < count; ++i) {
        GElf_Sym sym;
        if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
        if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
        const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
        if (name == nullptr || name[0] == '\0') continue;
        ElfSymbol symbol;
        symbol.name = name;
        symbol.value = sym.st_value;
        symbol.size = sym.st_size;
        symbol.type = GELF_ST_TYPE(sym.st_info);
        symbol.binding = GELF_ST_BIND(sym.st_info);
        symbol.dynamic = table_type == SHT_DYNSYM;
        GElf_Shdr section;
        Elf_Scn* section_scn = sym.st_shndx < SHN_LORESERVE ? elf_getscn(elf, sym.st_shndx) : nullptr;
        symbol.in_code = section_scn != nullptr && gelf_getshdr(section_scn, &section) != nullptr &&
                         (section.sh_flags & SHF_EXECINSTR) != 0;
        visit(symbol);
      }
    }
  }
  return absl::OkStatus();
}

bool IsCodeSymbol(const ElfSymbol& symbol) {
  if (symbol.type == STT_FUNC || symbol.type == STT_GNU_IFUNC) return true;
  return symbol.type == STT_NOTYPE && symbol.in_code;
}

absl::Status ReadElfSymbols(absl::Span<const uint8_t> bytes, const std::string& path,
                            SymbolTable* table) {
  absl::Status status;
  AddCodeSymbols(bytes, path, table, &status);
  if (!status.ok()) return status;
  absl::StatusOr<ElfHandle> elf = OpenElf(bytes, path);
  if (!elf.ok()) return elf.status();
  AddPltSymbols(elf->get(), table);
  AddPltGotSymbols(elf->get(), table);
  GElf_Shdr shdr;
  Elf_Scn* scn = FindSection(elf->get(), ".gnu_debugdata", &shdr);
  Elf_Data* data = scn != nullptr && shdr.sh_type != SHT_NOBITS ? elf_getdata(scn, nullptr) : nullptr;
  if (data != nullptr && data->d_buf != nullptr) {
    const std::string what = absl::StrCat(path, ": .gnu_debugdata");
    absl::StatusOr<std::vector<uint8_t>> mini = XzDecompress(
        absl::MakeConstSpan(static_cast<const uint8_t*>(data->d_buf), data->d_size), what);
    if (!mini.ok()) return mini.status();
    AddCodeSymbols(*mini, what, table, &status);
  }
  return status;
}

std::vector<FdeRange> ReadFdeRanges(absl::Span<const uint8_t> bytes, const std::string& path) {
  absl::StatusOr<ElfHandle> elf = OpenElf(bytes, path);
  if (!elf.ok()) return {};
  GElf_Shdr hdr, frame;
  Elf_Scn* hdr_scn = FindSection(elf->get(), ".eh_frame_hdr", &hdr);
  Elf_Scn* frame_scn = FindSection(elf->get(), ".eh_frame", &frame);
  if (hdr_scn == nullptr || frame_scn == nullptr || hdr.sh_type == SHT_NOBITS || frame.sh_type == SHT_NOBITS) return {};
  Elf_Data* hdr_data = elf_getdata(hdr_scn, nullptr);
  Elf_Data* frame_data = elf_getdata(frame_scn, nullptr);
  if (hdr_data == nullptr || hdr_data->d_buf == nullptr || frame_data == nullptr || frame_data->d_buf == nullptr) return {};
  // version 1, eh_frame_ptr encoding, fde_count encoding, table encoding; eh_frame_ptr;
  // fde_count; then (initial location, FDE address) pairs relative to the index.
  constexpr uint8_t kPcrelSdata4 = 0x1b, kUdata4 = 0x03, kDatarelSdata4 = 0x3b;
  const auto* h = static_cast<const uint8_t*>(hdr_data->d_buf);
  const auto* f = static_cast<const uint8_t*>(frame_data->d_buf);
  if (hdr_data->d_size < 12 || h[0] != 1 || h[1] != kPcrelSdata4 || h[2] != kUdata4 || h[3] != kDatarelSdata4) return {};
  auto read32 = [](const uint8_t* at) {
    int32_t v;
    std::memcpy(&v, at, 4);
    return v;
  };
  uint32_t count;
  std::memcpy(&count, h + 8, 4);
  count = static_cast<uint32_t>(std::min<uint64_t>(count, (hdr_data->d_size - 12) / 8));
  std::vector<FdeRange> ranges;
  ranges.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t start = hdr.sh_addr + read32(h + 12 + 8 * i);
    const uint64_t fde = hdr.sh_addr + read32(h + 16 + 8 * i);
    // FDE: length, CIE pointer, pc_begin, pc_range. The CIE's pointer encoding is taken to
    // be the index's (pcrel sdata4) only when pc_begin read so gives the index's start.
    if (fde < frame.sh_addr || fde + 16 > frame.sh_addr + frame_data->d_size) continue;
    const uint8_t* at = f + (fde - frame.sh_addr);
    if (fde + 8 + read32(at + 8) != start) continue;
    const uint32_t size = static_cast<uint32_t>(read32(at + 12));
    if (size != 0) ranges.push_back(FdeRange{start, start + size});
  }
  std::sort(ranges.begin(), ranges.end(), [](const FdeRange& a, const FdeRange& b) { return a.start < b.start; });
  return ranges;
}

std::string DebugFileForBuildId(const std::string& build_id, const std::string& debug_root) {
  if (build_id.size() < 3) return "";
  return absl::StrCat(debug_root, "/.build-id/", build_id.substr(0, 2), "/", build_id.substr(2), ".debug");
}

std::vector<std::string> DebugFilesForDebuglink(const std::string& path, const std::string& debuglink,
                                                const std::string& debug_root) {
  if (debuglink.empty()) return {};
  const std::string dir = Dirname(path);
  return {absl::StrCat(dir, "/", debuglink), absl::StrCat(dir, "/.debug/", debuglink),
          absl::StrCat(debug_root, dir[0] == '/' ? "" : "/", dir, "/", debuglink)};
}

}  // namespace ptd::image

