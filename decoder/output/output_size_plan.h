#pragma once
// `decode --max-output-size S`: choosing the level of detail that fits S. A first decode
// counts the FTF bytes full detail would take and samples its slices (begin, duration);
// the plan keeps every slice in a window at the end (half the budget: the newest part of
// the trace, where a snapshot's trigger is) and, before it, the slices of at least the
// duration that makes the rest fit (decoder/output/detail_filter.h does the keeping).

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "decoder/output/detail_filter.h"
#include "decoder/output/slice_sink.h"

namespace ptd::decoder {

// A uniform sample of at most `capacity` slices (reservoir sampling, fixed seed: the
// same trace gives the same plan).
class SliceSample {
 public:
  explicit SliceSample(size_t capacity = size_t{1} << 20) : capacity_(capacity) {}
  void Add(uint64_t begin, uint64_t duration);

  struct Slice {
    uint64_t begin = 0;
    uint64_t duration = 0;
  };
  const std::vector<Slice>& slices() const { return slices_; }
  uint64_t total() const { return total_; }
  // Of every slice added (not only the sampled ones).
  uint64_t first_begin() const { return first_begin_; }
  uint64_t last_end() const { return last_end_; }

 private:
  size_t capacity_;
  uint64_t first_begin_ = UINT64_MAX;
  uint64_t last_end_ = 0;
  std::vector<Slice> slices_;
  uint64_t total_ = 0;
  std::mt19937_64 rng_{1};
};

// Feeds every slice of one thread to a SliceSample and passes it on.
class SamplingSliceSink : public SliceSink {
 public:
  SamplingSliceSink(SliceSample* sample, SliceSink* next) : sample_(sample), next_(next) {}
  void Begin(uint64_t time, absl::string_view name) override;
  void BeginWithSource(uint64_t time, absl::string_view name, const image::SourceFrame& source) override {
    Begin(time, name, &source);
  }
  void End(uint64_t time, const SliceCounts& counts) override;
  void Instant(uint64_t time, absl::string_view name, absl::string_view detail) override {
    next_->Instant(time, name, detail);
  }

 private:
  void Begin(uint64_t time, absl::string_view name, const image::SourceFrame* source);
  SliceSample* sample_;
  SliceSink* next_;
  std::vector<uint64_t> begins_;
};

struct DetailPlan {
  bool full = true;            // full detail fits: nothing dropped
  DetailOptions detail;        // min_duration and full_detail_from when not full
  uint64_t expected_bytes = 0;
};

// The plan for `budget` bytes when full detail takes `full_bytes` for `sample.total()`
// slices. `base` carries the user's own --min-duration / --max-depth (never relaxed).
DetailPlan PlanDetail(const SliceSample& sample, uint64_t full_bytes, uint64_t budget, const DetailOptions& base);

}  // namespace ptd::decoder
