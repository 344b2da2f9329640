#include "recorder/images/kernel_images.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/elf_build_id.h"
#include "common/file_util.h"
#include "common/unique_fd.h"

namespace ptd {
namespace {

// Where kernel text begins and ends by kallsyms, and whether its addresses are hidden.
struct KallsymsScan {
  uint64_t text = 0, etext = 0;
  size_t lines = 0, zero = 0;
};

KallsymsScan ScanKallsyms(const std::string& text) {
  KallsymsScan scan;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    uint64_t address = 0;
    if (parts.size() < 3 || !absl::SimpleHexAtoi(parts[0], &address)) continue;
    ++scan.lines;
    if (address == 0) ++scan.zero;
    if (parts[2] == "_text" || (parts[2] == "_stext" && scan.text == 0)) scan.text = address;
    if (parts[2] == "_etext") scan.etext = address;
  }
  return scan;
}

bool ReadAt(int fd, uint64_t offset, void* out, size_t size) {
  return ::pread(fd, out, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size);
}

// The program headers of a 64-bit ELF file (kcore, vmlinux).
absl::StatusOr<std::vector<Elf64_Phdr>> ProgramHeaders(int fd, const std::string& path) {
  Elf64_Ehdr eh;
  if (!ReadAt(fd, 0, &eh, sizeof(eh)) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a 64-bit ELF file"));
  }
  std::vector<Elf64_Phdr> headers(eh.e_phnum);
  if (!headers.empty() && !ReadAt(fd, eh.e_phoff, headers.data(), headers.size() * sizeof(Elf64_Phdr))) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated program headers"));
  }
  return headers;
}

// `size` bytes of kernel memory at `vaddr`, from kcore's PT_LOAD segment holding them.
absl::StatusOr<std::string> ReadKcore(const std::string& kcore, uint64_t vaddr, uint64_t size) {
  UniqueFd fd(::open(kcore.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("cannot open", kcore, errno);
  absl::StatusOr<std::vector<Elf64_Phdr>> headers = ProgramHeaders(fd.get(), kcore);
  if (!headers.ok()) return headers.status();
  for (const Elf64_Phdr& ph : *headers) {
    if (ph.p_type != PT_LOAD || vaddr < ph.p_vaddr || vaddr + size > ph.p_vaddr + ph.p_filesz) continue;
    std::string bytes(size, '\0');
    if (!ReadAt(fd.get(), ph.p_offset + (vaddr - ph.p_vaddr), bytes.data(), size)) {
      return ErrnoError("cannot read", kcore, errno);
    }
    return bytes;
  }
  return absl::NotFoundError(absl::StrFormat("%s: no segment holds [0x%x, +0x%x)", kcore, vaddr, size));
}

// A vmlinux with build-id `id`, "" when none is found.
std::string FindVmlinux(const KernelImageSources& sources, const std::string& release, const std::string& id) {
  std::vector<std::string> candidates;
  for (size_t i = 0; i < sources.vmlinux_dirs.size(); ++i) {
    const std::string& dir = sources.vmlinux_dirs[i];
    if (i < 2) candidates.push_back(absl::StrCat(dir, "/vmlinux-", release));
    const std::string by_id = absl::StrCat(dir, "/.build-id/", id.substr(0, 2), "/", id.substr(2));
    for (const char* suffix : {"", ".debug", "/elf", "/vmlinux"}) candidates.push_back(by_id + suffix);
  }
  for (const std::string& candidate : candidates) {
    absl::StatusOr<std::string> got = ReadElfBuildId(candidate);
    if (got.ok() && *got == id) return candidate;
  }
  return "";
}

// The image entry of `vmlinux` for the kernel text running at `text` (KASLR moves it
// from the link address): its first executable PT_LOAD.
std::optional<ImageEntry> VmlinuxImage(const std::string& vmlinux, uint64_t text, const std::string& id) {
  UniqueFd fd(::open(vmlinux.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  absl::StatusOr<std::vector<Elf64_Phdr>> headers = ProgramHeaders(fd.get(), vmlinux);
  if (!headers.ok()) return std::nullopt;
  for (const Elf64_Phdr& ph : *headers) {
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    return ImageEntry{vmlinux, "[kernel.kallsyms]", text, ph.p_offset, ph.p_filesz, -1, ImageKind::kFile, id};
  }
  return std::nullopt;
}

}  // namespace

std::string CaptureKernelImages(const TraceDirWriter& dir, const KernelImageSources& sources, TraceMeta* meta) {
  std::vector<std::string> missing;
  if (absl::Status s = MakeDirs(dir.FilePath(kKernelSubdir)); !s.ok()) {
    missing.push_back(absl::StrCat("everything (", s.message(), ")"));
  }
  std::string release = sources.release;
  if (struct utsname u; release.empty() && ::uname(&u) == 0) release = u.release;

  // Names, and where the text is.
  KallsymsScan scan;
  const std::string kallsyms_path = absl::StrCat(sources.proc_root, "/kallsyms");
  absl::StatusOr<std::string> kallsyms = ReadFileToString(kallsyms_path);
  if (!kallsyms.ok()) {
    missing.push_back(absl::StrCat("kernel function names (", kallsyms.status().message(), ")"));
  } else {
    scan = ScanKallsyms(*kallsyms);
    if (scan.lines == 0 || scan.zero == scan.lines) {
      missing.push_back(absl::StrCat(
          "kernel function names (", kallsyms_path,
          " shows every address as 0: kernel.kptr_restrict hides them from this user; root, or "
          "sysctl kernel.kptr_restrict=0)"));
    } else {
      const std::string file = absl::StrCat(kKernelSubdir, "/kallsyms");
      if (absl::Status s = WriteFileAtomic(dir.FilePath(file), *kallsyms); s.ok()) {
        meta->kernel.kallsyms = file;
      } else {
        missing.push_back(absl::StrCat("kernel function names (", s.message(), ")"));
      }
    }
  }

  // Build-ids: the kernel's and each module's.
  absl::StatusOr<std::vector<uint8_t>> notes = ReadFileBytes(absl::StrCat(sources.sys_root, "/kernel/notes"));
  if (notes.ok()) meta->kernel.build_id = BuildIdInNotes(*notes);
  if (meta->kernel.build_id.empty()) {
    missing.push_back(absl::StrCat("the kernel's build-id (", sources.sys_root, "/kernel/notes: ",
                                   notes.ok() ? "no build-id note" : notes.status().message(), ")"));
  }
  absl::StatusOr<std::string> modules = ReadFileToString(absl::StrCat(sources.proc_root, "/modules"));
  size_t hidden_modules = 0;
  if (modules.ok()) {
    for (absl::string_view line : absl::StrSplit(*modules, '\n', absl::SkipEmpty())) {
      // NAME SIZE REFS DEPS STATE ADDRESS [TAINT]
      std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      KernelModule module;
      if (parts.size() < 6 || !absl::SimpleAtoi(parts[1], &module.size) ||
          !absl::SimpleHexAtoi(absl::StripPrefix(parts[5], "0x"), &module.address)) {
        continue;
      }
      if (module.address == 0) ++hidden_modules;
      module.name = std::string(parts[0]);
      absl::StatusOr<std::vector<uint8_t>> module_notes =
          ReadFileBytes(absl::StrCat(sources.sys_root, "/module/", module.name, "/notes/.note.gnu.build-id"));
      if (module_notes.ok()) module.build_id = BuildIdInNotes(*module_notes);
      meta->kernel.modules.push_back(std::move(module));
    }
    if (hidden_modules > 0) {
      missing.push_back(absl::StrFormat("the load address of %d module(s) (/proc/modules shows 0: kptr_restrict)",
                                        hidden_modules));
    }
  } else {
    missing.push_back(absl::StrCat("the module list (", modules.status().message(), ")"));
  }

  // The code: kernel text (and modules) from kcore, as patched at run time; else a vmlinux.
  const std::string kcore = absl::StrCat(sources.proc_root, "/kcore");
  bool have_text = false;
  if (scan.text != 0 && scan.etext > scan.text) {
    absl::StatusOr<std::string> text = ReadKcore(kcore, scan.text, scan.etext - scan.text);
    const std::string file = absl::StrCat(kKernelSubdir, "/kcore-text.bin");
    absl::Status written = text.ok() ? WriteFileAtomic(dir.FilePath(file), *text) : text.status();
    if (written.ok()) {
      have_text = true;
      meta->images.push_back({file, "[kernel.kallsyms]", scan.text, 0, scan.etext - scan.text, -1,
                              ImageKind::kMemoryDump, meta->kernel.build_id});
      for (const KernelModule& module : meta->kernel.modules) {
        if (module.address == 0 || module.size == 0) continue;
        absl::StatusOr<std::string> bytes = ReadKcore(kcore, module.address, module.size);
        const std::string module_file = absl::StrCat(kKernelSubdir, "/module-", module.name, ".bin");
        if (!bytes.ok() || !WriteFileAtomic(dir.FilePath(module_file), *bytes).ok()) continue;
        meta->images.push_back({module_file, absl::StrCat("[", module.name, "]"), module.address, 0, module.size, -1,
                                ImageKind::kMemoryDump, module.build_id});
      }
    } else {
      missing.push_back(absl::StrCat("the kernel text from kcore (", written.message(),
                                     "; it needs root and a kernel with /proc/kcore)"));
    }
  }
  if (!meta->kernel.build_id.empty()) {
    const std::string vmlinux = FindVmlinux(sources, release, meta->kernel.build_id);
    if (!vmlinux.empty()) {
      meta->notes.push_back(absl::StrCat("kernel: vmlinux with the kernel's build-id: ", vmlinux));
      if (!have_text && scan.text != 0) {
        if (std::optional<ImageEntry> image = VmlinuxImage(vmlinux, scan.text, meta->kernel.build_id)) {
          meta->images.push_back(*image);
          have_text = true;
        }
      }
    } else if (!have_text) {
      missing.push_back(absl::StrCat("a vmlinux with build-id ", meta->kernel.build_id, " (looked in ",
                                     absl::StrJoin(sources.vmlinux_dirs, ", "), ")"));
    }
  }
  if (missing.empty()) return "";
  std::string message = absl::StrCat("--kernel: ", have_text ? "" : "kernel code will not decode: ",
                                     "not captured: ", absl::StrJoin(missing, "; "),
                                     ". User-space code decodes as usual");
  meta->notes.push_back(message);
  return message;
}

}  // namespace ptd
