#pragma once
// The one libipt image section cache a decode shares between every pt_image and decoder.
// libipt keeps its block cache inside cached sections, so code that is not added through
// here decodes several times slower (intel/libipt#63); sharing it lets every stream reuse
// the blocks another stream has already decoded. Debian's libipt locks it internally, so
// decoders on different threads may share it.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct pt_image_section_cache;

namespace ptd::image {

class SectionCache {
 public:
  SectionCache();

  // Adds `size` bytes of `path` starting at `file_offset`, to be mapped at `vaddr`.
  // Returns the section id (isid) for pt_image_add_cached.
  absl::StatusOr<int> AddFile(const std::string& path, uint64_t file_offset, uint64_t size,
                              uint64_t vaddr);

  pt_image_section_cache* get() const { return cache_.get(); }

 private:
  struct Free {
    void operator()(pt_image_section_cache* cache) const;
  };
  std::unique_ptr<pt_image_section_cache, Free> cache_;
};

}  // namespace ptd::image
