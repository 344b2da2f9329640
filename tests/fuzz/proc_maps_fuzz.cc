// /proc/PID/maps parser: any text gives mappings or an error naming the line, never a
// crash; every parsed mapping is well-formed (end >= start).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "recorder/sideband/proc_maps.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<ptd::ProcMapping>> maps = ptd::ParseProcMaps(text, "fuzz/maps");
  if (maps.ok()) {
    for (const ptd::ProcMapping& m : *maps) {
      if (m.end < m.start) std::abort();
    }
  }
  return 0;
}
