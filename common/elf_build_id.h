#pragma once
// The GNU build-id of an ELF file, read from its PT_NOTE segments without libelf (the
// recorder notes the build-id of every file the target mapped, so a decode on a machine
// where the file has changed can say so; the decoder finds separate debug files by it).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ptd {

// Lowercase hex of the NT_GNU_BUILD_ID note; "" when the file is an ELF without one.
// Errors name the file (not readable, not a 64-bit little-endian ELF).
absl::StatusOr<std::string> ReadElfBuildId(const std::string& path);

// The same for a file already in memory; `path` names it in errors only.
absl::StatusOr<std::string> ElfBuildIdOfBytes(absl::Span<const uint8_t> file, const std::string& path);

// The NT_GNU_BUILD_ID note among raw ELF notes (a PT_NOTE's bytes, /sys/kernel/notes,
// /sys/module/NAME/notes/.note.gnu.build-id); "" when there is none.
std::string BuildIdInNotes(absl::Span<const uint8_t> notes);

}  // namespace ptd
