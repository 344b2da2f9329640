#pragma once
// `import raw`: a raw PT byte stream plus memory images from another tool (simple-pt,
// kAFL/libxdc, Griffin …) becomes a trace directory that `decode` reads like any other.
// Page dumps are coalesced here, once: contiguous pages become one file and one libipt
// section, because many tiny sections make decoding several times slower.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/host_info.h"
#include "image/maps_spec.h"

namespace ptd::image {

struct RawImportOptions {
  std::string pt_path;
  std::optional<CpuId> cpu;     // decides libipt errata; none: no errata applied
  std::vector<MapSpec> maps;    // from --maps and --map, in order (later ones win overlaps)
  std::string kallsyms;         // a /proc/kallsyms copy naming kernel code; "" for none
  std::string output_dir;
  bool force = false;
};

struct RawImportResult {
  std::vector<std::string> warnings;
  size_t pieces = 0;       // mappings before coalescing (pages count one each)
  size_t dump_files = 0;   // coalesced dump files written
  size_t file_images = 0;  // ELF files referenced in place
};

absl::StatusOr<RawImportResult> ImportRaw(const RawImportOptions& options);

// "6/85/4" → family 6, model 85, stepping 4 (decimal, or 0x hex).
absl::StatusOr<CpuId> ParseCpuTriple(absl::string_view text);

}  // namespace ptd::image
