#include "common/elf_build_id.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "common/hex.h"
#include "common/file_util.h"

namespace ptd {
namespace {

// Notes are 4-byte aligned (n_namesz and n_descsz padded).
uint64_t Align4(uint64_t v) { return (v + 3) & ~uint64_t{3}; }

}  // namespace

std::string BuildIdInNotes(absl::Span<const uint8_t> notes) {
  uint64_t pos = 0;
  while (pos + sizeof(Elf64_Nhdr) <= notes.size()) {
    Elf64_Nhdr note;
    std::memcpy(&note, notes.data() + pos, sizeof(note));
    const uint64_t name_at = pos + sizeof(note);
    const uint64_t desc_at = name_at + Align4(note.n_namesz);
    const uint64_t end = desc_at + Align4(note.n_descsz);
    if (desc_at + note.n_descsz > notes.size()) break;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
        std::memcmp(notes.data() + name_at, "GNU", 4) == 0) {
      return HexString(absl::MakeConstSpan(notes.data() + desc_at, note.n_descsz));
    }
    pos = end;
  }
  return "";
}

namespace {

// Reads `size` bytes at `offset` of the file; false when they are not all there.
using ReadAtFn = absl::FunctionRef<bool(uint64_t offset, void* out, size_t size)>;

absl::StatusOr<std::string> FindBuildId(ReadAtFn read_at, const std::string& path) {
  Elf64_Ehdr header;
  if (!read_at(0, &header, sizeof(header)) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
      header.e_phentsize != sizeof(Elf64_Phdr)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a 64-bit little-endian ELF file"));
  }
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr phdr;
    if (!read_at(header.e_phoff + uint64_t{i} * sizeof(phdr), &phdr, sizeof(phdr))) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": program header ", i, " is past the end"));
    }
    // Build-id notes are a few dozen bytes; a huge PT_NOTE is not worth reading.
    if (phdr.p_type != PT_NOTE || phdr.p_filesz == 0 || phdr.p_filesz > (1u << 16)) continue;
    std::vector<uint8_t> notes(phdr.p_filesz);
    if (!read_at(phdr.p_offset, notes.data(), notes.size())) continue;
    if (std::string id = BuildIdInNotes(notes); !id.empty()) return id;
  }
  return std::string();
}

}  // namespace

absl::StatusOr<std::string> ReadElfBuildId(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  return FindBuildId(
      [fd](uint64_t offset, void* out, size_t size) {
        auto* p = static_cast<uint8_t*>(out);
        while (size > 0) {
          ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) return false;
          p += n;
          offset += static_cast<uint64_t>(n);
          size -= static_cast<size_t>(n);
        }
        return true;
      },
      path);
}

absl::StatusOr<std::string> ElfBuildIdOfBytes(absl::Span<const uint8_t> file, const std::string& path) {
  return FindBuildId(
      [file](uint64_t offset, void* out, size_t size) {
        if (offset > file.size() || size > file.size() - offset) return false;
        std::memcpy(out, file.data() + offset, size);
        return true;
      },
      path);
}

}  // namespace ptd
