#include "decoder/output/output_size_plan.h"

#include <algorithm>

namespace ptd::decoder {

void SliceSample::Add(uint64_t begin, uint64_t duration) {
  ++total_;
  first_begin_ = std::min(first_begin_, begin);
  last_end_ = std::max(last_end_, begin + duration);
  if (slices_.size() < capacity_) {
    slices_.push_back({begin, duration});
    return;
  }
  const uint64_t slot = std::uniform_int_distribution<uint64_t>(0, total_ - 1)(rng_);
  if (slot < capacity_) slices_[slot] = {begin, duration};
}

void SamplingSliceSink::Begin(uint64_t time, absl::string_view name) { Begin(time, name, nullptr); }

void SamplingSliceSink::Begin(uint64_t time, absl::string_view name, const image::SourceFrame* source) {
  begins_.push_back(time);
  if (source != nullptr) {
    next_->BeginWithSource(time, name, *source);
  } else {
    next_->Begin(time, name);
  }
}

void SamplingSliceSink::End(uint64_t time, const SliceCounts& counts) {
  if (!begins_.empty()) {
    const uint64_t begin = begins_.back();
    begins_.pop_back();
    sample_->Add(begin, time > begin ? time - begin : 0);
  }
  next_->End(time, counts);
}

DetailPlan PlanDetail(const SliceSample& sample, uint64_t full_bytes, uint64_t budget, const DetailOptions& base) {
  DetailPlan plan;
  plan.detail = base;
  plan.expected_bytes = full_bytes;
  if (full_bytes <= budget || sample.slices().empty()) return plan;
  plan.full = false;
  // Bytes per slice, the fixed records (threads, names) included: errs on the safe side.
  const double bytes_per_slice = static_cast<double>(full_bytes) / static_cast<double>(sample.total());
  const double scale = static_cast<double>(sample.total()) / static_cast<double>(sample.slices().size());
  const double budget_slices = static_cast<double>(budget) / bytes_per_slice;  // of the whole trace
  const auto sampled = [&](double slices) { return static_cast<size_t>(slices / scale); };

  // Full detail for the newest half of the budget.
  std::vector<SliceSample::Slice> by_begin = sample.slices();
  std::sort(by_begin.begin(), by_begin.end(),
            [](const SliceSample::Slice& a, const SliceSample::Slice& b) { return a.begin > b.begin; });
  const size_t window = std::min(by_begin.size(), sampled(budget_slices / 2));
  plan.detail.full_detail_from = window == 0 ? UINT64_MAX : by_begin[window - 1].begin;
  // Before it, the longest slices that fill the rest.
  std::vector<uint64_t> durations;
  size_t in_window = 0;
  for (const SliceSample::Slice& s : by_begin) {
    if (s.begin >= plan.detail.full_detail_from) {
      ++in_window;
    } else {
      durations.push_back(s.duration);
    }
  }
  std::sort(durations.begin(), durations.end(), std::greater<>());
  const double left = budget_slices - static_cast<double>(in_window) * scale;
  const size_t coarse = left > 0 ? std::min(durations.size(), sampled(left)) : 0;
  // Keep durations strictly above the first one left out (ties would overshoot).
  uint64_t min_duration = coarse < durations.size() ? durations[coarse] + 1 : 1;
  plan.detail.min_duration = std::max(base.min_duration, min_duration);
  size_t kept = in_window;
  for (uint64_t d : durations) kept += d >= plan.detail.min_duration ? 1 : 0;
  plan.expected_bytes = static_cast<uint64_t>(static_cast<double>(kept) * scale * bytes_per_slice);
  return plan;
}

}  // namespace ptd::decoder
