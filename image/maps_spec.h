#pragma once
// Memory-image specifications for `import raw`: what the --maps file and --map options
// say, before any file is read.
//
//   --maps file, one mapping per line ('#' starts a comment):
//     PATH VADDR [OFFSET SIZE]       bytes of PATH (from OFFSET, SIZE bytes) at VADDR
//     pages ADDRFILE DUMPFILE [PAGESIZE]
//                                    page dump: ADDRFILE holds one little-endian u64
//                                    address per page, DUMPFILE the pages in that order
//                                    (kAFL/libxdc data.addr + data.dump)
//   --map PATH@VADDR[:OFFSET:SIZE]
// Numbers are decimal or 0x-prefixed hex. Relative paths in a maps file are relative to
// the maps file's directory.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ptd::image {

struct MapSpec {
  enum class Kind { kFile, kPages };
  Kind kind = Kind::kFile;
  std::string path;          // kFile: the bytes; kPages: the page dump
  std::string address_file;  // kPages only
  uint64_t vaddr = 0;
  uint64_t file_offset = 0;
  uint64_t size = 0;         // 0: to the end of the file
  uint64_t page_size = 4096; // kPages only
  std::string origin;        // "maps.txt:3" or "--map", for error messages
};

// `source` names the text in errors; `base_dir` resolves relative paths ("" keeps them).
absl::StatusOr<std::vector<MapSpec>> ParseMapsText(absl::string_view text, const std::string& source,
                                                   const std::string& base_dir);
absl::StatusOr<MapSpec> ParseMapOption(absl::string_view option);

// Decimal or 0x hex, the whole string.
bool ParseNumber(absl::string_view text, uint64_t* value);

}  // namespace ptd::image
