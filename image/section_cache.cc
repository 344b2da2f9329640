#include "image/section_cache.h"

#include <intel-pt.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace ptd::image {

SectionCache::SectionCache() : cache_(pt_iscache_alloc("ptd")) {}

void SectionCache::Free::operator()(pt_image_section_cache* cache) const {
  pt_iscache_free(cache);
}

absl::StatusOr<int> SectionCache::AddFile(const std::string& path, uint64_t file_offset,
                                          uint64_t size, uint64_t vaddr) {
  if (cache_ == nullptr) return absl::ResourceExhaustedError("libipt section cache not allocated");
  int isid = pt_iscache_add_file(cache_.get(), path.c_str(), file_offset, size, vaddr);
  if (isid < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: cannot add bytes [0x%x, +0x%x) at 0x%x to the section cache: %s",
                        path, file_offset, size, vaddr, pt_errstr(pt_errcode(isid))));
  }
  return isid;
}

}  // namespace ptd::image
