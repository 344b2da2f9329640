#pragma once
// Function ranges by address (ProcessImage::RangeOf: two binary searches) with the last
// ones looked up kept direct-mapped: jumps and call targets come back again and again.
// Cleared with the image.

#include <cstdint>

#include "common/recent_by_address.h"
#include "image/process_image.h"

namespace ptd::decoder {

class FunctionRangeCache {
 public:
  const image::FunctionRange& At(const image::ProcessImage& image, uint64_t address) {
    if (const image::FunctionRange* known = recent_.Find(address)) return *known;
    return recent_.Put(address, image.RangeOf(address));
  }
  void Clear() { recent_.Clear(); }

 private:
  RecentByAddress<image::FunctionRange, 4096> recent_;
};

}  // namespace ptd::decoder
