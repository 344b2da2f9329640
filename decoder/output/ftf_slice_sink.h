#pragma once
// Slices of one thread written to an FTF file: Begin/End pairs (an End's args merge into
// the slice it closes in Perfetto, which is where the instruction count is known), and
// instants for errors. Optionally keeps only slices that begin inside a time window.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "decoder/output/slice_sink.h"
#include "ftf/ftf_writer.h"
#include "ftf/string_handle.h"

namespace ptd::decoder {

class FtfSliceSink : public SliceSink {
 public:
  FtfSliceSink(ftf::FtfWriter* writer, uint64_t pid, uint64_t tid,
               uint64_t window_begin = 0, uint64_t window_end = UINT64_MAX);
  // end_args_ point into the sink.
  FtfSliceSink(const FtfSliceSink&) = delete;
  FtfSliceSink& operator=(const FtfSliceSink&) = delete;

  void Begin(uint64_t time, absl::string_view name) override;
  // Args: "source" (decl file:line), and for an inlined call "inlined" (true) and
  // "call_site" (file:line), made once per function.
  void BeginWithSource(uint64_t time, absl::string_view name, const image::SourceFrame& source) override;
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
  // An End's args (instructions, cycles), built once: each End sets their values.
  ftf::Arg end_args_[2] = {ftf::Arg::Uint64(instructions_, 0), ftf::Arg::Uint64(cycles_, 0)};
  uint64_t pid_;
  uint64_t tid_;
  uint64_t window_begin_;
  uint64_t window_end_;
  ftf::StringHandle source_{"source"};
  ftf::StringHandle inlined_{"inlined"};
  ftf::StringHandle call_site_{"call_site"};
  // Per source frame, its slices' strings and their handles (node map: the handles'
  // texts stay where they are).
  struct SourceArgs {
    std::string source;
    std::string call_site;
    std::string name;  // of its first slice
    // Over the three strings once they are set.
    ftf::StringHandle source_handle{""};
    ftf::StringHandle call_site_handle{""};
    ftf::StringHandle name_handle{""};
  };
  absl::node_hash_map<const image::SourceFrame*, SourceArgs> source_args_;
  std::vector<uint8_t> written_;  // per open slice: was its Begin written (not vector<bool>: per event)
  uint64_t slices_ = 0;
};

}  // namespace ptd::decoder
