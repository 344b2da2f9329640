#include "decoder/output/ftf_slice_sink.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ptd::decoder {

FtfSliceSink::FtfSliceSink(ftf::FtfWriter* writer, uint64_t pid, uint64_t tid, uint64_t window_begin,
                           uint64_t window_end)
    : writer_(writer), pid_(pid), tid_(tid), window_begin_(window_begin), window_end_(window_end) {
  written_.reserve(64);
}

void FtfSliceSink::Begin(uint64_t time, absl::string_view name) {
  // A slice is kept when it begins in the window; its End then always follows, so the
  // output stays balanced.
  bool write = InWindow(time);
  written_.push_back(write);
  if (!write) return;
  ++slices_;
  writer_->DurationBegin(pid_, tid_, time, category_, name);
}

void FtfSliceSink::BeginWithSource(uint64_t time, absl::string_view name, const image::SourceFrame& source) {
  bool write = InWindow(time);
  written_.push_back(write);
  if (!write) return;
  ++slices_;
  auto [it, inserted] = source_args_.try_emplace(&source);
  SourceArgs& made = it->second;
  if (inserted) {
    made.source = image::DefinitionLocation(source);
    if (source.inlined) made.call_site = absl::StrCat(source.call_file, ":", source.call_line);
    made.name = std::string(name);
    made.source_handle = ftf::StringHandle(made.source);
    made.call_site_handle = ftf::StringHandle(made.call_site);
    made.name_handle = ftf::StringHandle(made.name);
  }
  ftf::Arg args[3];
  size_t n = 0;
  if (!made.source.empty()) args[n++] = ftf::Arg::String(source_, made.source_handle);
  if (source.inlined) {
    args[n++] = ftf::Arg::Bool(inlined_, true);
    args[n++] = ftf::Arg::String(call_site_, made.call_site_handle);
  }
  // The name is the frame's each time but for a symbol the DWARF does not name (then
  // the caller's, which may differ between calls): compared, not assumed.
  if (name == made.name) {
    writer_->DurationBegin(pid_, tid_, time, category_, made.name_handle, absl::MakeConstSpan(args, n));
  } else {
    writer_->DurationBegin(pid_, tid_, time, category_.text(), name, absl::MakeConstSpan(args, n));
  }
}

void FtfSliceSink::End(uint64_t time, const SliceCounts& counts) {
  if (written_.empty()) return;
  bool write = written_.back();
  written_.pop_back();
  if (!write) return;
  end_args_[0].bits = counts.instructions;
  end_args_[1].bits = counts.cycles;
  writer_->DurationEnd(pid_, tid_, time, category_, absl::MakeConstSpan(end_args_, counts.has_cycles ? 2 : 1));
}

void FtfSliceSink::Instant(uint64_t time, absl::string_view name, absl::string_view detail) {
  if (!InWindow(time)) return;
  if (detail.empty()) {
    writer_->Instant(pid_, tid_, time, category_.text(), name);
  } else {
    ftf::Arg args[1] = {ftf::Arg::String("detail", detail)};
    writer_->Instant(pid_, tid_, time, category_.text(), name, args);
  }
}

}  // namespace ptd::decoder
