#include "image/raw_import.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "image/elf_reader.h"
#include "image/mapped_file.h"
#include "ptd/version.h"

namespace ptd::image {
namespace {

// A piece of a dump file destined for one address.
struct DumpPiece {
  const MappedFile* source = nullptr;
  uint64_t source_offset = 0;
  uint64_t size = 0;
  uint64_t vaddr = 0;
  size_t order = 0;  // later specs win overlaps
  std::string name;
};

}  // namespace

absl::StatusOr<CpuId> ParseCpuTriple(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  CpuId cpu;
  cpu.vendor = "intel";
  uint64_t values[3];
  if (parts.size() != 3 || !ParseNumber(parts[0], &values[0]) || !ParseNumber(parts[1], &values[1]) ||
      !ParseNumber(parts[2], &values[2]) || values[0] > 0xffff || values[1] > 0xff || values[2] > 0xf) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu '", text, "': expected FAMILY/MODEL/STEPPING, e.g. 6/85/4"));
  }
  cpu.family = static_cast<uint32_t>(values[0]);
  cpu.model = static_cast<uint32_t>(values[1]);
  cpu.stepping = static_cast<uint32_t>(values[2]);
  return cpu;
}

absl::StatusOr<RawImportResult> ImportRaw(const RawImportOptions& options) {
  RawImportResult result;
  std::map<std::string, std::shared_ptr<const MappedFile>> files;
  auto open = [&](const std::string& path) -> absl::StatusOr<const MappedFile*> {
    auto it = files.find(path);
    if (it != files.end()) return it->second.get();
    absl::StatusOr<std::shared_ptr<const MappedFile>> f = MappedFile::Open(path);
    if (!f.ok()) return f.status();
    files.emplace(path, *f);
    return f->get();
  };

  std::vector<DumpPiece> pieces;
  std::vector<ImageEntry> file_images;  // ELF files referenced in place
  for (size_t i = 0; i < options.maps.size(); ++i) {
    const MapSpec& spec = options.maps[i];
    absl::StatusOr<const MappedFile*> source = open(spec.path);
    if (!source.ok()) return absl::NotFoundError(absl::StrCat(spec.origin, ": ", source.status().message()));
    uint64_t file_size = (*source)->bytes().size();
    if (spec.kind == MapSpec::Kind::kPages) {
      absl::StatusOr<const MappedFile*> addresses = open(spec.address_file);
      if (!addresses.ok()) {
        return absl::NotFoundError(absl::StrCat(spec.origin, ": ", addresses.status().message()));
      }
      absl::Span<const uint8_t> addr_bytes = (*addresses)->bytes();
      uint64_t pages = addr_bytes.size() / 8;
      if (addr_bytes.size() % 8 != 0 || pages * spec.page_size > file_size) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: %s holds %d addresses (%d bytes) but %s has only %d bytes for pages of %d",
            spec.origin, spec.address_file, pages, addr_bytes.size(), spec.path, file_size, spec.page_size));
      }
      for (uint64_t p = 0; p < pages; ++p) {
        uint64_t vaddr;
        std::memcpy(&vaddr, addr_bytes.data() + 8 * p, 8);
        pieces.push_back(DumpPiece{*source, p * spec.page_size, spec.page_size, vaddr, i, std::string(Basename(spec.path))});
      }
      continue;
    }
    if (spec.file_offset >= file_size) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: offset 0x%x is beyond the end of %s (0x%x bytes)",
                                                        spec.origin, spec.file_offset, spec.path, file_size));
    }
    uint64_t size = spec.size == 0 ? file_size - spec.file_offset : spec.size;
    if (spec.file_offset + size > file_size) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: [0x%x, +0x%x) runs past the end of %s (0x%x bytes)",
                                                        spec.origin, spec.file_offset, size, spec.path, file_size));
    }
    // A real ELF file larger than the mapped range is referenced in place (it has the
    // symbols); exact-size copies (page dumps of ELF code) are copied like any dump.
    bool reference = false;
    if (LooksLikeElf((*source)->bytes()) && (spec.size == 0 || file_size > size)) {
      absl::StatusOr<ElfInfo> elf = ReadElfInfo((*source)->bytes(), spec.path);
      if (elf.ok() && !elf->segments.empty()) {
        reference = true;
        char* real = ::realpath(spec.path.c_str(), nullptr);
        std::string absolute = real != nullptr ? real : spec.path;
        std::free(real);
        file_images.push_back(ImageEntry{absolute, absolute, spec.vaddr, spec.file_offset, size, -1,
                                         ImageKind::kFile, elf->build_id});
      }
    }
    if (!reference) pieces.push_back(DumpPiece{*source, spec.file_offset, size, spec.vaddr, i, std::string(Basename(spec.path))});
  }
  result.pieces = pieces.size() + file_images.size();

  // Coalesce: sort by address (later specs first among equals so they win), drop bytes
  // an earlier-placed piece already covers, and join what is contiguous.
  std::stable_sort(pieces.begin(), pieces.end(), [](const DumpPiece& a, const DumpPiece& b) {
    if (a.vaddr != b.vaddr) return a.vaddr < b.vaddr;
    return a.order > b.order;
  });
  struct Run {
    uint64_t vaddr = 0;
    uint64_t size = 0;
    std::string name;
    std::vector<DumpPiece> parts;
  };
  std::vector<Run> runs;
  size_t overlaps = 0;
  for (DumpPiece piece : pieces) {
    if (!runs.empty()) {
      Run& last = runs.back();
      uint64_t last_end = last.vaddr + last.size;
      if (piece.vaddr < last_end) {
        ++overlaps;
        uint64_t skip = std::min(piece.size, last_end - piece.vaddr);
        piece.vaddr += skip;
        piece.source_offset += skip;
        piece.size -= skip;
        if (piece.size == 0) continue;
      }
      if (piece.vaddr == last_end && piece.name == last.name) {
        last.size += piece.size;
        last.parts.push_back(piece);
        continue;
      }
    }
    runs.push_back(Run{piece.vaddr, piece.size, piece.name, {piece}});
  }
  if (overlaps > 0) {
    result.warnings.push_back(absl::StrFormat("%d overlapping mappings: the later one is kept", overlaps));
  }

  absl::StatusOr<TraceDirWriter> writer = TraceDirWriter::Create(options.output_dir, options.force);
  if (!writer.ok()) return writer.status();
  TraceMeta meta;
  meta.tool_version = kToolVersion;
  meta.mode = TraceMode::kImported;
  meta.per = "thread";
  if (options.cpu) {
    meta.host.cpu = *options.cpu;
  } else {
    meta.host.cpu.vendor = "unknown";
    result.warnings.push_back("no --cpu given: no libipt errata will be applied when decoding");
  }
  meta.pt.user_only = true;

  absl::StatusOr<std::vector<uint8_t>> pt = ReadFileBytes(options.pt_path);
  if (!pt.ok()) return pt.status();
  if (absl::Status s = MakeDirs(writer->FilePath(kAuxSubdir)); !s.ok()) return s;
  if (absl::Status s = MakeDirs(writer->FilePath(kImagesSubdir)); !s.ok()) return s;
  const std::string aux_rel = absl::StrCat(kAuxSubdir, "/stream0.pt");
  if (absl::Status s = WriteFileAtomic(writer->FilePath(aux_rel), *pt); !s.ok()) return s;
  PtStream stream;
  stream.file = aux_rel;
  PtChunk chunk;
  chunk.size = pt->size();
  chunk.reason = "import";
  stream.chunks.push_back(chunk);
  meta.streams.push_back(stream);

  for (const Run& run : runs) {
    std::vector<uint8_t> bytes;
    bytes.reserve(run.size);
    for (const DumpPiece& part : run.parts) {
      const uint8_t* data = part.source->bytes().data() + part.source_offset;
      bytes.insert(bytes.end(), data, data + part.size);
    }
    std::string rel = absl::StrFormat("%s/dump-%016x.bin", kImagesSubdir, run.vaddr);
    if (absl::Status s = WriteFileAtomic(writer->FilePath(rel), bytes); !s.ok()) return s;
    meta.images.push_back(ImageEntry{rel, run.name, run.vaddr, 0, run.size, -1, ImageKind::kMemoryDump, ""});
  }
  meta.images.insert(meta.images.end(), file_images.begin(), file_images.end());
  if (!options.kallsyms.empty()) {
    absl::StatusOr<std::string> kallsyms = ReadFileToString(options.kallsyms);
    if (!kallsyms.ok()) return kallsyms.status();
    if (absl::Status s = MakeDirs(writer->FilePath(kKernelSubdir)); !s.ok()) return s;
    meta.kernel.kallsyms = absl::StrCat(kKernelSubdir, "/kallsyms");
    if (absl::Status s = WriteFileAtomic(writer->FilePath(meta.kernel.kallsyms), *kallsyms); !s.ok()) return s;
  }
  result.dump_files = runs.size();
  result.file_images = file_images.size();
  meta.notes.push_back(absl::StrFormat("imported from %s: %d mappings coalesced into %d dump files, %d ELF files",
                                       options.pt_path, result.pieces, runs.size(), file_images.size()));
  for (const std::string& w : result.warnings) meta.notes.push_back(w);
  if (absl::Status s = writer->Commit(meta); !s.ok()) return s;
  return result;
}

}  // namespace ptd::image
