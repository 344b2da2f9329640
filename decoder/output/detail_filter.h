#pragma once
// Level of detail (`decode --min-duration`, `--max-depth`): a SliceSink in front of
// another that drops slices shorter than a duration or nested deeper than a depth. A
// dropped slice's time stays in its parent (as self time) and its instructions in the
// parent's count, which already includes its callees'.
//
// Begins are held until the slice is known to be long enough: at its End, or as soon as
// any later event of the thread comes `min_duration` after its begin. Held slices form
// the top of the open stack above the written ones, so what is written stays nested and
// in time order, and memory is one entry per open frame.

#include <cstdint>
#include <string>
#include <vector>

#include "decoder/output/slice_sink.h"
#include "decoder/stats.h"

namespace ptd::decoder {

struct DetailOptions {
  uint64_t min_duration = 0;  // output time units (ns on the time axis); 0: keep all
  uint32_t max_depth = 0;     // outermost slice is depth 1; 0: no limit
  // Slices beginning at or after this time are kept whatever their duration (the full
  // detail window of --max-output-size); max_depth still applies.
  uint64_t full_detail_from = UINT64_MAX;
  bool active() const { return min_duration > 0 || max_depth > 0; }
};

class DetailFilterSink : public SliceSink {
 public:
  DetailFilterSink(SliceSink* next, const DetailOptions& options) : next_(next), options_(options) {}

  void Begin(uint64_t time, absl::string_view name) override;
  void BeginWithSource(uint64_t time, absl::string_view name, const image::SourceFrame& source) override;
  void End(uint64_t time, const SliceCounts& counts) override;
  // Instants are kept with every slice open around them.
  void Instant(uint64_t time, absl::string_view name, absl::string_view detail) override;

  // detail_kept, dropped_short, dropped_deep.
  const Stats& stats() const { return stats_; }

 private:
  struct Open {
    uint64_t begin = 0;
    std::string name;  // held Begins only; reused between frames (no allocation per event)
    const image::SourceFrame* source = nullptr;
    bool too_deep = false;
  };
  void BeginFrame(uint64_t time, absl::string_view name, const image::SourceFrame* source);
  // Writes held Begins from the bottom up while `keep(frame)` holds.
  void WriteHeld(uint64_t now, bool all);

  SliceSink* next_;
  DetailOptions options_;
  std::vector<Open> stack_;
  size_t open_ = 0;     // frames in use in stack_ (entries above keep their strings)
  size_t written_ = 0;  // the bottom `written_` frames have had their Begin written
  Stats stats_;
};

}  // namespace ptd::decoder
