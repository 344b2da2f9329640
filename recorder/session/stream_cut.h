#pragma once
// --trim's last step, the same for every backend: a stream file loses its bytes before a
// cut offset (a PSB, where a decoder can start) and its chunk list is re-based on what
// is left.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/trace_meta.h"

namespace ptd {

// Rewrites the stream file at `path` to hold only its bytes from `cut` on (a cut past
// the end keeps nothing) and re-bases `chunks` on it: chunks wholly before the cut go,
// one across it starts at the cut (its aux_offset moved with it), the first chunk kept
// is marked lost_before. A cut of 0 changes nothing. On error the file and `chunks` are
// as they were.
absl::Status CutStreamFile(const std::string& path, uint64_t cut, std::vector<PtChunk>* chunks);

}  // namespace ptd
