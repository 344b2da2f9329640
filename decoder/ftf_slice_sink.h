#pragma once
// Slices of one thread written to an FTF file: Begin/End pairs (an End's args merge into
// the slice it closes in Perfetto, which is where the instruction count is known), and
// instants for errors. Optionally keeps only slices that begin inside a time window.

#include <cstdint>
#include <vector>

#include "decoder/slice_sink.h"
#include "ftf/ftf_writer.h"
#include "ftf/string_handle.h"

namespace ptd::decoder {

class FtfSliceSink : public SliceSink {
 public:
  FtfSliceSink(ftf::FtfWriter* writer, uint64_t pid, uint64_t tid,
               uint64_t window_begin = 0, uint64_t window_end = UINT64_MAX);

  void Begin(uint64_t time, absl::string_view name) override;
  void End(uint64_t time, const SliceCounts& counts) override;
  void Instant(uint64_t time, absl::string_view name, absl::string_view detail) override;

  uint64_t slices() const { return slices_; }

 private:
  bool InWindow(uint64_t time) const { return time >= window_begin_ && time < window_end_; }

  ftf::FtfWriter* writer_;
  // Strings of every slice, looked up once.
  ftf::StringHandle category_{"pt"};
  ftf::StringHandle instructions_{"instructions"};
  ftf::StringHandle cycles_{"cycles"};
  uint64_t pid_;
  uint64_t tid_;
  uint64_t window_begin_;
  uint64_t window_end_;
  std::vector<bool> written_;  // per open slice: was its Begin written
  uint64_t slices_ = 0;
};

}  // namespace ptd::decoder
