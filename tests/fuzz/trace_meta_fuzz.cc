// meta.json parser: any bytes give a TraceMeta or an error, never a crash; what parses
// re-serializes to something that parses again to the same text.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/trace_meta.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ptd::TraceMeta> meta = ptd::ParseTraceMeta(text, "fuzz/meta.json");
  if (meta.ok()) {
    std::string again = ptd::SerializeTraceMeta(*meta);
    absl::StatusOr<ptd::TraceMeta> back = ptd::ParseTraceMeta(again, "fuzz/meta.json");
    if (!back.ok() || ptd::SerializeTraceMeta(*back) != again) std::abort();
  }
  return 0;
}
