// CallStackModel: the slices of inlined calls (DWARF) along each run between two events.
#include "decoder/model/call_stack_model.h"

#include <algorithm>
#include <vector>

#include "decoder/model/call_stack_emit.h"

namespace ptd::decoder {

void CallStackModel::SetInlineChain(const image::SourceFrame* innermost, uint64_t index, uint64_t count,
                                    const FlowEvent& event) {
  // The open slices are always one whole chain, so the same innermost inlined frame
  // means the same chain: the common case (every run's first instruction) ends here.
  const image::SourceFrame* innermost_inlined = innermost != nullptr && innermost->inlined ? innermost : nullptr;
  const Frame& current = frames_.back();
  if (innermost_inlined == (current.inline_open > 0 ? open_inlines_.back().frame : nullptr)) return;
  chain_.clear();
  for (const image::SourceFrame* f = innermost; f != nullptr && f->inlined; f = f->parent) chain_.push_back(f);
  std::reverse(chain_.begin(), chain_.end());
  Frame& top = frames_.back();
  const size_t first = open_inlines_.size() - top.inline_open;
  size_t same = 0;
  while (same < top.inline_open && same < chain_.size() && open_inlines_[first + same].frame == chain_[same]) ++same;
  if (same == top.inline_open && same == chain_.size()) return;
  // Instruction `index` begins at the run's counts plus `index`; time by instruction.
  auto interpolate = [&](uint64_t from, uint64_t to) {
    if (to <= from) return from;
    return from + static_cast<uint64_t>(static_cast<unsigned __int128>(to - from) * index / count);
  };
  const uint64_t time = interpolate(run_time_, event.time);
  const uint64_t instructions = run_instructions_ + index;
  const uint64_t cycles = interpolate(run_cycles_, event.cycles);
  while (top.inline_open > same) CloseInline(time, instructions, cycles);
  MaterializeTop();
  for (size_t i = same; i < chain_.size(); ++i) {
    // Below the fold depth only, so a frame pushed above still finds room for the marker.
    const bool emitted = top.emitted && !top.fold_marker && emitted_on_stack_ + emitted_inlines_ < kFoldDepth;
    open_inlines_.push_back(OpenInline{chain_[i], time, instructions, cycles, emitted});
    ++top.inline_open;
    if (emitted) ++emitted_inlines_;
    if (emitted) EmitBegin(time, chain_[i]->name.empty() ? absl::string_view("[inlined]") : chain_[i]->name, chain_[i]);
  }
}

void CallStackModel::CloseInline(uint64_t time, uint64_t instructions, uint64_t cycles) {
  const OpenInline& open = open_inlines_.back();
  if (open.emitted) {
    EmitEnd(time, instructions - open.begin_instructions, cycles - open.begin_cycles);
    --emitted_inlines_;
  }
  open_inlines_.pop_back();
  --frames_.back().inline_open;
}

}  // namespace ptd::decoder
