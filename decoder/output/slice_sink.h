#pragma once
// Where the call-stack model puts slices: one sink per thread. The FTF writer sits behind
// it in the product; tests record what arrives.

#include <cstdint>

#include "absl/strings/string_view.h"
#include "image/inline_table.h"

namespace ptd::decoder {

struct SliceCounts {
  uint64_t instructions = 0;  // executed between Begin and End, callees included
  uint64_t cycles = 0;
  bool has_cycles = false;
};

class SliceSink {
 public:
  virtual ~SliceSink() = default;
  // Slices nest: every End closes the innermost open Begin.
  virtual void Begin(uint64_t time, absl::string_view name) = 0;
  // A Begin whose function's source is known (DWARF): where it is declared and, for an
  // inlined call (source.inlined), where it was called. Sinks that do not show it take
  // a Begin.
  virtual void BeginWithSource(uint64_t time, absl::string_view name, const image::SourceFrame& source) {
    (void)source;
    Begin(time, name);
  }
  virtual void End(uint64_t time, const SliceCounts& counts) = 0;
  // A zero-length marker: errors, overflow, lost data. `detail` may be empty.
  virtual void Instant(uint64_t time, absl::string_view name, absl::string_view detail) = 0;
};

}  // namespace ptd::decoder
