#include "decoder/flow/section_block_cache.h"

namespace ptd::decoder {
namespace {

// Moves a run's addresses by `delta` (wrapping): the last instruction's IP and a direct
// branch's target (the only kind that has one in the instruction).
BlockSummary Moved(BlockSummary summary, uint64_t delta) {
  if (summary.ninsn == 0) return summary;
  summary.last.ip += delta;
  if (summary.last.direct) summary.last.target += delta;
  return summary;
}

}  // namespace

bool SectionBlocks::Find(uint64_t base, uint64_t offset, BlockSummary* out) const {
  std::shared_lock lock(mutex_);
  auto it = runs_.find(offset);
  if (it == runs_.end()) return false;
  *out = Moved(it->second, base);
  return true;
}

void SectionBlocks::Add(uint64_t base, uint64_t offset, const BlockSummary& summary) {
  BlockSummary relative = Moved(summary, -base);
  std::unique_lock lock(mutex_);
  runs_.try_emplace(offset, relative);
}

SectionBlocks* SectionBlockCache::Get(const std::shared_ptr<const image::Module>& module, uint64_t file_offset,
                                      uint64_t size, pt_exec_mode mode) {
  std::lock_guard lock(mutex_);
  std::unique_ptr<SectionBlocks>& blocks = sections_[Key{module.get(), file_offset, size, mode}];
  if (blocks == nullptr) blocks = std::make_unique<SectionBlocks>(module);
  return blocks.get();
}

}  // namespace ptd::decoder
