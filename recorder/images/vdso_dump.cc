#include "recorder/images/vdso_dump.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/elf_build_id.h"
#include "common/file_util.h"

namespace ptd {

absl::StatusOr<std::vector<uint8_t>> ReadProcessMemory(int pid, uint64_t start, uint64_t size) {
  std::string path = absl::StrCat("/proc/", pid, "/mem");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  std::vector<uint8_t> bytes(size);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, bytes.data() + done, size - done, static_cast<off_t>(start + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      return ErrnoError(absl::StrFormat("cannot read 0x%x bytes at 0x%x of", size - done,
                                        start + done),
                        path, err);
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return bytes;
}

absl::Status CheckElfImage(const std::vector<uint8_t>& bytes, const std::string& what) {
  if (bytes.size() < EI_NIDENT || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0) {
    return absl::DataLossError(absl::StrCat(what, ": offset 0: no ELF magic"));
  }
  if (elf_version(EV_CURRENT) == EV_NONE) {
    return absl::InternalError(absl::StrCat("libelf: ", elf_errmsg(-1)));
  }
  // libelf reads the buffer in place and never writes to it with ELF_C_READ_MMAP-like use.
  Elf* elf = elf_memory(reinterpret_cast<char*>(const_cast<uint8_t*>(bytes.data())), bytes.size());
  if (elf == nullptr) return absl::DataLossError(absl::StrCat(what, ": libelf: ", elf_errmsg(-1)));
  absl::Status status = absl::OkStatus();
  GElf_Ehdr ehdr;
  size_t sections = 0;
  if (elf_kind(elf) != ELF_K_ELF) {
    status = absl::DataLossError(absl::StrCat(what, ": not an ELF object"));
  } else if (gelf_getehdr(elf, &ehdr) == nullptr) {
    status = absl::DataLossError(absl::StrCat(what, ": ELF header: ", elf_errmsg(-1)));
  } else if (ehdr.e_shoff > bytes.size() ||
             static_cast<uint64_t>(ehdr.e_shnum) * ehdr.e_shentsize > bytes.size() - ehdr.e_shoff ||
             ehdr.e_phoff > bytes.size() ||
             static_cast<uint64_t>(ehdr.e_phnum) * ehdr.e_phentsize > bytes.size() - ehdr.e_phoff) {
    // libelf reports a table past the end as "no sections"; a dump must be whole.
    status = absl::DataLossError(absl::StrFormat(
        "%s: offset 0x%x: section or program header table (shoff 0x%x, %d entries; phoff "
        "0x%x, %d entries) extends past the 0x%x-byte image",
        what, ehdr.e_shoff > bytes.size() ? ehdr.e_shoff : ehdr.e_phoff, ehdr.e_shoff,
        ehdr.e_shnum, ehdr.e_phoff, ehdr.e_phnum, bytes.size()));
  } else if (elf_getshdrnum(elf, &sections) != 0) {
    status = absl::DataLossError(absl::StrCat(what, ": section headers: ", elf_errmsg(-1)));
  } else {
    // Every section header must parse and lie inside the image (NOBITS aside).
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      if (gelf_getshdr(scn, &shdr) == nullptr) {
        status = absl::DataLossError(absl::StrCat(what, ": section header: ", elf_errmsg(-1)));
        break;
      }
      if (shdr.sh_type != SHT_NOBITS &&
          (shdr.sh_offset > bytes.size() || shdr.sh_size > bytes.size() - shdr.sh_offset)) {
        status = absl::DataLossError(absl::StrFormat(
            "%s: section %d at offset 0x%x size 0x%x lies outside the 0x%x-byte image", what,
            elf_ndxscn(scn), shdr.sh_offset, shdr.sh_size, bytes.size()));
        break;
      }
    }
  }
  elf_end(elf);
  return status;
}

// Writes the bytes of special mapping `m` to images/`file_name` and describes them for
// meta.json (named after the mapping: "[vdso]", "[vsyscall]").
static absl::StatusOr<ImageEntry> SaveImage(const TraceDirWriter& dir, const std::string& file_name,
                                     const std::vector<uint8_t>& bytes, const ProcMapping& m, int pid,
                                     ImageKind kind) {
  std::string rel = absl::StrCat(kImagesSubdir, "/", file_name);
  if (absl::Status st = WriteFileAtomic(dir.FilePath(rel), absl::MakeConstSpan(bytes)); !st.ok()) return st;
  ImageEntry image;
  image.path = rel;
  image.name = m.path;
  image.vaddr = m.start;
  image.size = m.end - m.start;
  image.pid = pid;
  image.kind = kind;
  return image;
}

namespace {

// e_ident[EI_CLASS] and e_machine of an ELF file's header.
absl::StatusOr<std::pair<int, int>> ElfClassAndMachine(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  Elf64_Ehdr ehdr{};
  const ssize_t n = ::pread(fd, &ehdr, sizeof(ehdr), 0);
  const int err = errno;
  ::close(fd);
  if (n < 0) return ErrnoError("cannot read", path, err);
  if (static_cast<size_t>(n) < EI_NIDENT + 4 || std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": offset 0: no ELF header"));
  }
  // e_machine sits at the same offset in 32- and 64-bit headers.
  return std::make_pair(static_cast<int>(ehdr.e_ident[EI_CLASS]), static_cast<int>(ehdr.e_machine));
}

// This process's own [vdso] when it is the image `m` of `pid` maps (see
// DumpSpecialMemory); the error says why it cannot stand in.
absl::StatusOr<std::vector<uint8_t>> OwnVdsoAsStandIn(int pid, const ProcMapping& m) {
  absl::StatusOr<std::vector<ProcMapping>> own_maps = ReadProcMaps(getpid());
  if (!own_maps.ok()) return own_maps.status();
  const ProcMapping* own = nullptr;
  for (const ProcMapping& o : *own_maps) {
    if (o.path == "[vdso]") own = &o;
  }
  if (own == nullptr) return absl::NotFoundError("this process has no [vdso] to stand in");
  if (own->end - own->start != m.end - m.start) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "its [vdso] is 0x%x bytes, this process's 0x%x: another ABI's image", m.end - m.start,
        own->end - own->start));
  }
  absl::StatusOr<std::pair<int, int>> target = ElfClassAndMachine(absl::StrCat("/proc/", pid, "/exe"));
  if (!target.ok()) return target.status();
  absl::StatusOr<std::pair<int, int>> self = ElfClassAndMachine("/proc/self/exe");
  if (!self.ok()) return self.status();
  if (*target != *self) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "its executable is ELF class %d machine %d, this process's class %d machine %d: "
        "another ABI's vDSO", target->first, target->second, self->first, self->second));
  }
  const auto* p = reinterpret_cast<const uint8_t*>(own->start);
  return std::vector<uint8_t>(p, p + (own->end - own->start));
}

}  // namespace

absl::StatusOr<SpecialMemoryDump> DumpSpecialMemory(int pid, const std::vector<ProcMapping>& maps,
                                                    const TraceDirWriter& dir,
                                                    const ProcessMemoryReader& read) {
  SpecialMemoryDump dump;
  bool saw_vdso = false;
  uint64_t anon_exec_bytes = 0;
  int anon_exec_count = 0;
  for (const ProcMapping& m : maps) {
    if (m.path == "[vdso]") {
      saw_vdso = true;
      absl::StatusOr<std::vector<uint8_t>> bytes = read(pid, m.start, m.end - m.start);
      if (!bytes.ok() && absl::IsPermissionDenied(bytes.status())) {
        absl::StatusOr<std::vector<uint8_t>> own = OwnVdsoAsStandIn(pid, m);
        if (!own.ok()) {
          return absl::Status(bytes.status().code(),
                              absl::StrCat(bytes.status().message(), "; [vdso] of pid ", pid,
                                           ": this process's cannot stand in: ",
                                           own.status().message()));
        }
        absl::StatusOr<std::string> build_id = ElfBuildIdOfBytes(*own, "[vdso]");
        dump.notes.push_back(absl::StrCat(
            "[vdso] of pid ", pid, " unreadable (", bytes.status().message(),
            "): this process's [vdso] saved instead, the same kernel's image for the same "
            "ABI (build-id ", build_id.ok() && !build_id->empty() ? *build_id : "unknown", ")"));
        bytes = *std::move(own);
      }
      if (!bytes.ok()) return bytes.status();
      std::string name = absl::StrCat("vdso.", pid, ".so");
      if (absl::Status st = CheckElfImage(*bytes, absl::StrCat("[vdso] of pid ", pid)); !st.ok()) {
        return st;
      }
      absl::StatusOr<ImageEntry> image = SaveImage(dir, name, *bytes, m, pid, ImageKind::kVdso);
      if (!image.ok()) return image.status();
      dump.images.push_back(*std::move(image));
    } else if (m.path == "[vsyscall]") {
      // Modern kernels make [vsyscall] execute-only (xonly) or emulate it: unreadable
      // is normal, so it is a note rather than an error.
      absl::StatusOr<std::vector<uint8_t>> bytes = read(pid, m.start, m.end - m.start);
      if (!bytes.ok()) {
        dump.notes.push_back(absl::StrCat("[vsyscall] of pid ", pid, " not dumped: ",
                                          std::string(bytes.status().message())));
        continue;
      }
      absl::StatusOr<ImageEntry> image = SaveImage(dir, absl::StrCat("vsyscall.", pid, ".bin"), *bytes, m,
                                                   pid, ImageKind::kMemoryDump);
      if (!image.ok()) return image.status();
      dump.images.push_back(*std::move(image));
    } else if (m.anonymous() && m.executable()) {
      anon_exec_count++;
      anon_exec_bytes += m.end - m.start;
    }
  }
  if (!saw_vdso) dump.notes.push_back(absl::StrCat("pid ", pid, " has no [vdso] mapping"));
  if (anon_exec_count > 0) {
    dump.notes.push_back(absl::StrFormat(
        "pid %d has %d anonymous executable mapping(s), %d bytes (JIT code?): their code "
        "cannot be decoded without a dump or /tmp/perf-%d.map symbols",
        pid, anon_exec_count, anon_exec_bytes, pid));
  }
  return dump;
}

absl::StatusOr<std::vector<ProcMapping>> DumpSpecialMemoryOf(int pid, const TraceDirWriter& dir,
                                                             std::vector<ImageEntry>* images,
                                                             std::vector<std::string>* notes) {
  absl::StatusOr<std::vector<ProcMapping>> maps = ReadProcMaps(pid);
  if (!maps.ok()) return maps.status();
  absl::StatusOr<SpecialMemoryDump> dump = DumpSpecialMemory(pid, *maps, dir);
  if (!dump.ok()) return dump.status();
  images->insert(images->end(), dump->images.begin(), dump->images.end());
  notes->insert(notes->end(), dump->notes.begin(), dump->notes.end());
  return maps;
}

absl::StatusOr<bool> CopyPerfMap(int pid, const TraceDirWriter& dir) {
  std::string perf_map = absl::StrCat("/tmp/perf-", pid, ".map");
  if (!PathExists(perf_map)) return false;
  absl::StatusOr<std::string> text = ReadFileToString(perf_map);
  if (!text.ok()) return text.status();
  std::string rel = absl::StrCat(kImagesSubdir, "/perf-", pid, ".map");
  if (absl::Status st = WriteFileAtomic(dir.FilePath(rel), std::string_view(*text)); !st.ok()) {
    return st;
  }
  return true;
}

}  // namespace ptd
